package ddbloop_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/sluice-dev/sluice/pkg/adapter/ddbloop"
	"github.com/sluice-dev/sluice/pkg/loop"
)

// appliedThenLost is DynamoDB as the SDK sees it when the answer to an
// applied TransactWriteItems is lost: the first call is applied and its
// connection closed before the answer; a retry with the first call's
// ClientRequestToken is answered as that call (DynamoDB's idempotency),
// any other retry fails the version condition the applied write moved on.
type appliedThenLost struct {
	mu     sync.Mutex
	tokens []string
}

func (d *appliedThenLost) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var in struct{ ClientRequestToken string }
	_ = json.Unmarshal(body, &in)
	d.mu.Lock()
	d.tokens = append(d.tokens, in.ClientRequestToken)
	n, first := len(d.tokens), d.tokens[0]
	d.mu.Unlock()
	switch {
	case n == 1:
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	case in.ClientRequestToken != "" && in.ClientRequestToken == first:
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		_, _ = io.WriteString(w, `{}`)
	default:
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"__type":"com.amazonaws.dynamodb.v20120810#TransactionCanceledException","message":"Transaction cancelled","CancellationReasons":[{"Code":"ConditionalCheckFailed"}]}`)
	}
}

// TestCommitTickRetryOfAnAppliedWrite: a tick whose write was applied but
// whose answer was lost is not reported as a conflict when the SDK retries:
// the SDK fills TransactWriteItems' ClientRequestToken itself (an
// idempotency token in the API model) and sends the same one on the retry.
// moto_server ignores the token, which is why a paused tick once read
// `lost` there (docs/consumers.md, "Measured: full size").
func TestCommitTickRetryOfAnAppliedWrite(t *testing.T) {
	d := &appliedThenLost{}
	srv := httptest.NewServer(d)
	defer srv.Close()
	api := dynamodb.New(dynamodb.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(srv.URL),
		Credentials: aws.AnonymousCredentials{},
	})
	s := ddbloop.New(api, "t")
	err := s.CommitTick(context.Background(), loop.Commit{PrevVersion: 18, State: loop.State{Loop: "l", Version: 19}})
	if err != nil {
		t.Errorf("CommitTick after the SDK retried an applied write: %v; want nil", err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.tokens) < 2 {
		t.Fatalf("%d calls; want the SDK's retry of the lost answer", len(d.tokens))
	}
	if tok := d.tokens[0]; tok == "" || len(tok) > 36 {
		t.Errorf("ClientRequestToken %q; want 1 to 36 characters", tok)
	}
}
