package protocheck

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sluice-dev/sluice/pkg/protocol"
)

// Item is an item in DynamoDB's attribute values.
type Item = map[string]types.AttributeValue

// Kind names item's kind by the table of keys ("RATE", "LEASE1", ...),
// or "" when it is no item of the protocol (PARAMS, STATE, history).
func (r *Rules) Kind(item Item) string {
	sk, _ := str(item, "sk")
	for _, k := range r.Keys {
		if k.SK.MatchString(sk) {
			return k.Item
		}
	}
	return ""
}

// Check returns every rule item breaks, each error naming its rule; nil
// for an item of no protocol kind.
func (r *Rules) Check(item Item) []error {
	kind := r.Kind(item)
	if kind == "" {
		return nil
	}
	pk, _ := str(item, "pk")
	sk, _ := str(item, "sk")
	var errs []error
	fail := func(rule, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s %s/%s: rule %s: %s", kind, pk, sk, rule, fmt.Sprintf(format, args...)))
	}
	attrs := r.Items[kind]
	for _, a := range attrs {
		if err := checkAttr(item, a); err != nil {
			fail("types", "%v", err)
		}
	}
	for name := range item {
		if _, ok := attrs[name]; !ok {
			fail("unknown", "attribute %s is not in the table of %s", name, kind)
		}
	}
	r.checkKeys(kind, item, pk, sk, fail)
	checkExpiry(kind, item, fail)
	checkBatches(item, fail)
	return errs
}

func checkAttr(item Item, a Attr) error {
	av, ok := item[a.Name]
	if !ok {
		if a.Required {
			return fmt.Errorf("attribute %s is required", a.Name)
		}
		return nil
	}
	switch a.Type {
	case "S":
		s, ok := av.(*types.AttributeValueMemberS)
		if !ok {
			return fmt.Errorf("attribute %s: want a string (S), got %T", a.Name, av)
		}
		if a.Qual == "time" {
			if _, err := time.Parse(time.RFC3339Nano, s.Value); err != nil {
				return fmt.Errorf("attribute %s: %q is not an RFC 3339 time", a.Name, s.Value)
			}
		}
	case "N":
		n, ok := av.(*types.AttributeValueMemberN)
		if !ok {
			return fmt.Errorf("attribute %s: want a number (N), got %T", a.Name, av)
		}
		if a.Qual == "count" {
			if _, err := strconv.ParseInt(n.Value, 10, 64); err != nil {
				return fmt.Errorf("attribute %s: %q is not a whole number", a.Name, n.Value)
			}
		} else if _, err := strconv.ParseFloat(n.Value, 64); err != nil {
			return fmt.Errorf("attribute %s: %q is not a number", a.Name, n.Value)
		}
	case "M":
		if _, ok := av.(*types.AttributeValueMemberM); !ok {
			return fmt.Errorf("attribute %s: want a map (M), got %T", a.Name, av)
		}
	}
	return nil
}

// checkKeys: the keys follow the table of keys, and name the item's loop
// and instance; a consumer's partition key begins with "<loop>#".
func (r *Rules) checkKeys(kind string, item Item, pk, sk string, fail func(rule, format string, args ...any)) {
	for _, k := range r.Keys {
		if k.Item != kind {
			continue
		}
		loop, _ := str(item, "loop")
		if kind == "RATE" {
			loop = pk
		}
		instance, _ := str(item, "instance")
		want := map[string]string{"loop": loop, "instance": instance}
		for _, m := range []struct {
			key, val string
			re       *regexp.Regexp
		}{{"pk", pk, k.PK}, {"sk", sk, k.SK}} {
			got := m.re.FindStringSubmatch(m.val)
			if got == nil {
				fail("keys", "%s %q does not follow its pattern %s", m.key, m.val, m.re)
				continue
			}
			for i, g := range m.re.SubexpNames() {
				if w, ok := want[g]; ok && got[i] != w {
					fail("keys", "%s %q names %s %q; the item's is %q", m.key, m.val, g, got[i], w)
				}
			}
		}
		if kind != "RATE" && (len(pk) <= len(loop) || pk[:len(loop)+1] != loop+"#") {
			fail("keys", "partition key %q does not begin with %q", pk, loop+"#")
		}
	}
}

// checkExpiry: expires_ms is expires_at; the lease's times are in order;
// the ttl outlives the lease (20 min) or the count's bucket.
func checkExpiry(kind string, item Item, fail func(rule, format string, args ...any)) {
	ttl, hasTTL := whole(item, "ttl")
	if kind == "LIVE" {
		sk, _ := str(item, "sk")
		b, err := strconv.ParseInt(sk[len(sk)-12:], 10, 64)
		if err == nil && hasTTL && ttl < (b+1)*int64(protocol.LiveBucket/time.Second) {
			fail("ttl", "ttl %d is before the end of bucket %d", ttl, b)
		}
		return
	}
	if kind == "RATE" {
		return
	}
	exp, e1 := timeAttr(item, "expires_at")
	rep, e2 := timeAttr(item, "reported_at")
	start, e3 := timeAttr(item, "started_at")
	if errors.Join(e1, e2, e3) != nil {
		return // the types rule said so
	}
	if ms, ok := whole(item, "expires_ms"); ok && ms != exp.UnixMilli() {
		fail("expiry", "expires_ms %d is not expires_at %s (%d)", ms, exp.Format(time.RFC3339Nano), exp.UnixMilli())
	}
	if exp.Before(rep) || exp.Sub(rep) > 10*time.Minute {
		fail("expiry", "expires_at %s is not within 10 minutes from reported_at %s", exp, rep)
	}
	if rep.Before(start) {
		fail("expiry", "reported_at %s is before started_at %s", rep, start)
	}
	if hasTTL && ttl < exp.Add(20*time.Minute).Unix() {
		fail("ttl", "ttl %d is less than expires_at + 20 min (%d)", ttl, exp.Add(20*time.Minute).Unix())
	}
}

// checkBatches: the batch counts come together; no count is negative.
func checkBatches(item Item, fail func(rule, format string, args ...any)) {
	n := 0
	for _, name := range []string{"batches", "batch_messages", "working_ns"} {
		if _, ok := item[name]; ok {
			n++
		}
	}
	if n != 0 && n != 3 {
		fail("batches", "%d of batches, batch_messages and working_ns; want all three or none", n)
	}
	for _, name := range []string{"stored", "batches", "batch_messages", "working_ns", "n", "legacy_live"} {
		if v, ok := whole(item, name); ok && v < 0 {
			fail("batches", "%s is %d; no count is negative", name, v)
		}
	}
}

// CheckTable checks every item of the protocol in table (one scan) and
// returns what breaks the rules and how many items of each kind it checked.
func (r *Rules) CheckTable(ctx context.Context, api dynamodb.ScanAPIClient, table string) ([]error, map[string]int, error) {
	var errs []error
	kinds := map[string]int{}
	for pages := dynamodb.NewScanPaginator(api, &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)}); pages.HasMorePages(); {
		out, err := pages.NextPage(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("scan %s: %w", table, err)
		}
		for _, item := range out.Items {
			if k := r.Kind(item); k != "" {
				kinds[k]++
				errs = append(errs, r.Check(item)...)
			}
		}
	}
	return errs, kinds, nil
}

func str(item Item, name string) (string, bool) {
	s, ok := item[name].(*types.AttributeValueMemberS)
	if !ok {
		return "", false
	}
	return s.Value, true
}

func whole(item Item, name string) (int64, bool) {
	n, ok := item[name].(*types.AttributeValueMemberN)
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseInt(n.Value, 10, 64)
	return v, err == nil
}

func timeAttr(item Item, name string) (time.Time, error) {
	s, _ := str(item, name)
	return time.Parse(time.RFC3339Nano, s)
}
