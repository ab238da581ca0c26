package e2ekit

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
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
