package paramsaudit

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sts"
)

func TestStamp(t *testing.T) {
	old := map[string]any{"setpoint": 70.0, "kd": 0.0, "metric_dimensions": map[string]any{"DBInstanceIdentifier": "a"}, "updated_by": "someone", "edit_version": 3}
	next := map[string]any{"setpoint": 50.0, "ki": 0.1, "metric_dimensions": map[string]any{"DBInstanceIdentifier": "b"}, "updated_by": "someone", "edit_version": 3}
	at := time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)
	changes := Stamp(old, next, "arn:aws:iam::1:user/alice", at)
	want := `kd: 0 -> -; ki: - -> 0.1; metric_dimensions: {"DBInstanceIdentifier":"a"} -> {"DBInstanceIdentifier":"b"}; setpoint: 70 -> 50`
	if got := Summary(changes); got != want {
		t.Errorf("Summary = %q; want %q", got, want)
	}
	if next[AttrBy] != "arn:aws:iam::1:user/alice" || next[AttrAt] != "2026-12-02T01:00:00Z" || next[AttrChanges] != want {
		t.Errorf("stamped %v; want who, when and what", next)
	}
	var buf bytes.Buffer
	Log(slog.New(slog.NewTextHandler(&buf, nil)), "orders", "alice", at, changes)
	if !strings.Contains(buf.String(), "params edit") || !strings.Contains(buf.String(), "setpoint: 70 -> 50") {
		t.Errorf("log = %q; want the edit", buf.String())
	}
}

type fakeSTS struct {
	arn string
	err error
}

func (f fakeSTS) GetCallerIdentity(context.Context, *sts.GetCallerIdentityInput, ...func(*sts.Options)) (*sts.GetCallerIdentityOutput, error) {
	return &sts.GetCallerIdentityOutput{Arn: aws.String(f.arn)}, f.err
}

func TestCaller(t *testing.T) {
	if got, err := Caller(context.Background(), fakeSTS{arn: "arn:aws:sts::1:assumed-role/ops/bob"}); err != nil || got != "arn:aws:sts::1:assumed-role/ops/bob" {
		t.Errorf("Caller = %q, %v; want the ARN", got, err)
	}
	if _, err := Caller(context.Background(), fakeSTS{err: errors.New("no credentials")}); err == nil || !strings.Contains(err.Error(), "GetCallerIdentity") {
		t.Errorf("Caller with a failing STS = %v; want an error naming the call", err)
	}
	if _, err := Caller(context.Background(), fakeSTS{}); err == nil {
		t.Errorf("Caller with no ARN: want an error")
	}
}
