package e2ekit

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/go-sql-driver/mysql"
	"golang.org/x/sys/unix"

	"github.com/sluice-dev/sluice/internal/testenv"
)

// DDBJSON writes PARAMS attributes as the aws CLI takes them, nested maps
// (signals) included.
func TestDDBJSON(t *testing.T) {
	got, err := json.Marshal(DDBJSON(map[string]any{
		"lag": map[string]any{"setpoint": 8.0, "unit": "s", "delay_aware": true, "dims": map[string]string{"k": "v"}, "n": 3, "x": nil},
	}))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"M":{"lag":{"M":{"delay_aware":{"BOOL":true},"dims":{"M":{"k":{"S":"v"}}},"n":{"N":"3"},"setpoint":{"N":"8"},"unit":{"S":"s"},"x":{"NULL":true}}}}}`
	if string(got) != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

type fakeQueue struct {
	calls  int
	failID string // refused once
	sent   []string
	bodies []string
}

func (f *fakeQueue) GetQueueAttributes(context.Context, *sqs.GetQueueAttributesInput, ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	return &sqs.GetQueueAttributesOutput{}, nil
}

func (f *fakeQueue) SendMessageBatch(_ context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	f.calls++
	out := &sqs.SendMessageBatchOutput{}
	for _, e := range in.Entries {
		if aws.ToString(e.Id) == f.failID {
			f.failID = ""
			out.Failed = append(out.Failed, sqstypes.BatchResultErrorEntry{Id: e.Id})
			continue
		}
		f.sent = append(f.sent, aws.ToString(e.Id))
		f.bodies = append(f.bodies, aws.ToString(e.MessageBody))
	}
	return out, nil
}

// SendEntries sends again exactly the entries SQS refused.
func TestSendEntriesRetriesRefusedEntries(t *testing.T) {
	q := &fakeQueue{failID: "2"}
	var entries []sqstypes.SendMessageBatchRequestEntry
	for _, id := range []string{"1", "2", "3"} {
		entries = append(entries, sqstypes.SendMessageBatchRequestEntry{Id: aws.String(id), MessageBody: aws.String("b")})
	}
	if err := SendEntries(context.Background(), q, "url", entries); err != nil {
		t.Fatal(err)
	}
	if q.calls != 2 || len(q.sent) != 3 || q.sent[2] != "2" {
		t.Fatalf("calls %d, sent %v; want 2 calls, 1 3 then 2", q.calls, q.sent)
	}
}

// Orders numbers the orders in sequence across sends and sends the seqs
// Poison names as poison.
func TestOrdersSendPoisonWherePoisonSays(t *testing.T) {
	q := &fakeQueue{}
	o := &Orders{API: q, QueueURL: "url", Poison: func(seq int64) bool { return seq%3 == 2 }}
	for range 2 {
		if err := o.Send(context.Background(), 2); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{`{"order_id":0,"amount":0}`, `{"order_id":1,"amount":1}`, "poison 2: not JSON", `{"order_id":3,"amount":3}`}
	if strings.Join(q.bodies, "|") != strings.Join(want, "|") || o.Sent.Load() != 4 || o.Poisoned.Load() != 1 {
		t.Fatalf("bodies %q, sent %d, poisoned %d; want %q, 4, 1", q.bodies, o.Sent.Load(), o.Poisoned.Load(), want)
	}
}

// What Go runs stops at the end of the run, before the cleanups deferred
// earlier run.
func TestGoStopsAtTheEndOfTheRun(t *testing.T) {
	r := &Run{Ctx: context.Background()}
	var order []string
	r.Defer(func() { order = append(order, "earlier cleanup") })
	r.Go(func(ctx context.Context) { <-ctx.Done(); order = append(order, "goroutine stopped") })
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
	if strings.Join(order, ", ") != "goroutine stopped, earlier cleanup" {
		t.Fatalf("order %v; want the goroutine stopped first", order)
	}
}

// CreateDatabase creates the database on the server, returns a DSN that
// names it, and drops it at the end of the run.
func TestCreateDatabaseDropsItAtTheEnd(t *testing.T) {
	cfg, err := mysql.ParseDSN(testenv.MySQLDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("sluice_e2ekit_%d", time.Now().UnixNano())
	r := &Run{Ctx: context.Background()}
	dsn, err := r.CreateDatabase(cfg, name, false)
	if err != nil {
		t.Fatal(err)
	}
	if own, err := mysql.ParseDSN(dsn); err != nil || own.DBName != name || cfg.DBName == name {
		t.Fatalf("DSN %s (%v); want one naming %s, the given config unchanged", dsn, err, name)
	}
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	exists := func() bool {
		var n int
		if err := db.QueryRow("SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?", name).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 1
	}
	if !exists() {
		t.Fatalf("database %s not created", name)
	}
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
	if exists() {
		t.Fatalf("database %s still there after the run", name)
	}
}

// Round rounds half away from zero to the given decimal places, as the
// harnesses' own math.Round(x*unit)/unit did.
func TestRound(t *testing.T) {
	for _, tt := range []struct {
		x      float64
		digits int
		want   float64
	}{
		{2.345, 2, 2.35}, {-2.345, 2, -2.35}, {0.12345, 4, 0.1235}, {17.26, 1, 17.3}, {17.5, 0, 18}, {1250, -2, 1300},
	} {
		if got := Round(tt.x, tt.digits); got != tt.want {
			t.Errorf("Round(%v, %d) = %v; want %v", tt.x, tt.digits, got, tt.want)
		}
	}
	for _, x := range []float64{0.005, 1.115, 33.333333, 99.995, 12345.678} {
		for _, d := range []int{1, 2, 3, 4} {
			unit := math.Pow10(d)
			if got, want := Round(x, d), math.Round(x*unit)/unit; got != want {
				t.Errorf("Round(%v, %d) = %v; want %v (math.Round(x*unit)/unit)", x, d, got, want)
			}
		}
	}
}

func TestParseCPUs(t *testing.T) {
	for list, want := range map[string][]int{"": nil, "1": {1}, "0,2": {0, 2}, "2-3,5": {2, 3, 5}, " 1 , 3-3": {1, 3}} {
		got, err := ParseCPUs(list)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("ParseCPUs(%q) = %v, %v; want %v", list, got, err, want)
		}
	}
	for _, bad := range []string{"a", "3-1", "-1", "1-x"} {
		if _, err := ParseCPUs(bad); err == nil {
			t.Errorf("ParseCPUs(%q): no error", bad)
		}
	}
}

func TestPinDatabase(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	affinity := func(pid int) unix.CPUSet {
		var s unix.CPUSet
		if err := unix.SchedGetaffinity(pid, &s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	before, self := affinity(cmd.Process.Pid), affinity(0)
	if self.Count() < 2 || !self.IsSet(1) {
		t.Skip("needs CPUs 0 and 1")
	}
	restore, err := PinDatabase(cmd.Process.Pid, []int{1})
	if err != nil {
		t.Fatal(err)
	}
	if db := affinity(cmd.Process.Pid); db.Count() != 1 || !db.IsSet(1) {
		t.Errorf("the database's affinity: %d CPUs, CPU 1 %v; want CPU 1 alone", db.Count(), db.IsSet(1))
	}
	if s := affinity(0); s.IsSet(1) || s.Count() == 0 {
		t.Errorf("this process still may use CPU 1 (or none): %d CPUs", s.Count())
	}
	restore()
	if affinity(cmd.Process.Pid) != before || affinity(0) != self {
		t.Error("restore did not give the former affinities back")
	}
	if _, err := PinDatabase(cmd.Process.Pid, []int{1000}); err == nil {
		t.Error("a CPU the machine does not have: no error")
	}
	if affinity(cmd.Process.Pid) != before || affinity(0) != self {
		t.Error("a refused pin changed the affinities")
	}
}
