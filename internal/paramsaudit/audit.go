// Package paramsaudit stamps every edit of a loop's PARAMS item with who
// made it, when, and what changed, in the item itself (updated_by,
// updated_at, updated_changes) and as a log line, for the CLI (`sluice
// params set`, the caller's identity from STS GetCallerIdentity) and the
// dashboard (its user).
package paramsaudit

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/sluice-dev/sluice/pkg/loop"
)

// The audit attributes of a PARAMS item; the controller ignores them.
const (
	AttrBy      = "updated_by"
	AttrAt      = "updated_at"
	AttrChanges = "updated_changes"
)

// Change is one attribute's edit: From is nil when it was added, To nil
// when it was removed.
type Change struct {
	Attr string `json:"attr"`
	From any    `json:"from"`
	To   any    `json:"to"`
}

// String is "setpoint: 70 -> 50" ("-" for an absent value).
func (c Change) String() string { return c.Attr + ": " + show(c.From) + " -> " + show(c.To) }

func show(v any) string {
	if v == nil {
		return "-"
	}
	if s, ok := v.(string); ok {
		return s
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// Diff is what changed from old to next, by attribute name, without the
// audit attributes, the keys and the edit version.
func Diff(old, next map[string]any) []Change {
	skip := map[string]bool{AttrBy: true, AttrAt: true, AttrChanges: true, "pk": true, "sk": true, loop.AttrEditVersion: true}
	names := slices.Sorted(maps.Keys(next))
	for k := range old {
		if _, ok := next[k]; !ok {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	var out []Change
	for _, k := range names {
		if skip[k] {
			continue
		}
		a, b := old[k], next[k]
		if show(a) != show(b) {
			out = append(out, Change{Attr: k, From: a, To: b})
		}
	}
	return out
}

// Summary is the changes in one line, "setpoint: 70 -> 50; kp: 1 -> 2".
func Summary(changes []Change) string {
	parts := make([]string, len(changes))
	for i, c := range changes {
		parts[i] = c.String()
	}
	return strings.Join(parts, "; ")
}

// Stamp records in next (the item to write) who edited it from old, when,
// and what changed; it returns the changes.
func Stamp(old, next map[string]any, who string, at time.Time) []Change {
	changes := Diff(old, next)
	next[AttrBy], next[AttrAt] = who, at.UTC().Format(time.RFC3339Nano)
	next[AttrChanges] = Summary(changes)
	return changes
}

// Log writes the audit line of an edit of loopID's PARAMS.
func Log(log *slog.Logger, loopID, who string, at time.Time, changes []Change) {
	log.Info("params edit", "loop", loopID, AttrBy, who, AttrAt, at.UTC().Format(time.RFC3339Nano), AttrChanges, Summary(changes))
}

// CallerIdentity is the part of the STS client that Caller needs.
type CallerIdentity interface {
	GetCallerIdentity(ctx context.Context, in *sts.GetCallerIdentityInput, opts ...func(*sts.Options)) (*sts.GetCallerIdentityOutput, error)
}

// Caller is the identity of whoever the AWS configuration signs as: the
// ARN that STS GetCallerIdentity returns.
func Caller(ctx context.Context, c CallerIdentity) (string, error) {
	out, err := c.GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
	if err != nil {
		return "", fmt.Errorf("who is editing: sts GetCallerIdentity: %w", err)
	}
	if arn := aws.ToString(out.Arn); arn != "" {
		return arn, nil
	}
	return "", fmt.Errorf("who is editing: sts GetCallerIdentity returned no ARN")
}
