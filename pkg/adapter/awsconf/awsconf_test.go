package awsconf_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sluice-dev/sluice/pkg/adapter/awsconf"
)

// recorder is an AWS endpoint that answers every JSON-protocol call with an
// empty object and records the target (X-Amz-Target) of each call.
type recorder struct {
	mu      sync.Mutex
	targets []string
}

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	r.targets = append(r.targets, req.Header.Get("X-Amz-Target"))
	r.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.Write([]byte("{}"))
}

func (r *recorder) got() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.targets...)
}

// TestLoadRoutesSQSByServiceEndpoint checks that the configuration Load
// returns lets AWS_ENDPOINT_URL_SQS move SQS alone (to ElasticMQ locally)
// while DynamoDB stays on AWS_ENDPOINT_URL (moto_server), and that SQS
// follows AWS_ENDPOINT_URL when the SQS variable is not set.
func TestLoadRoutesSQSByServiceEndpoint(t *testing.T) {
	tests := []struct {
		name              string
		sqsVar            bool
		wantMain, wantSQS []string
	}{
		{"AWS_ENDPOINT_URL_SQS set", true,
			[]string{"DynamoDB_20120810.ListTables"}, []string{"AmazonSQS.ListQueues"}},
		{"AWS_ENDPOINT_URL_SQS unset", false,
			[]string{"DynamoDB_20120810.ListTables", "AmazonSQS.ListQueues"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			main, sqsSrv := &recorder{}, &recorder{}
			ms, ss := httptest.NewServer(main), httptest.NewServer(sqsSrv)
			defer ms.Close()
			defer ss.Close()
			t.Setenv("AWS_ENDPOINT_URL", ms.URL)
			t.Setenv("AWS_ENDPOINT_URL_SQS", "")
			if tt.sqsVar {
				t.Setenv("AWS_ENDPOINT_URL_SQS", ss.URL)
			}
			t.Setenv("AWS_ACCESS_KEY_ID", "test")
			t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
			t.Setenv("AWS_REGION", "us-east-1")
			t.Setenv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "")
			t.Setenv("AWS_CONFIG_FILE", t.TempDir()+"/none")
			ctx := context.Background()
			cfg, err := awsconf.Load(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := dynamodb.NewFromConfig(cfg).ListTables(ctx, &dynamodb.ListTablesInput{}); err != nil {
				t.Fatalf("ListTables: %v", err)
			}
			if _, err := sqs.NewFromConfig(cfg).ListQueues(ctx, &sqs.ListQueuesInput{}); err != nil {
				t.Fatalf("ListQueues: %v", err)
			}
			if got := main.got(); !slices.Equal(got, tt.wantMain) {
				t.Errorf("calls on AWS_ENDPOINT_URL = %q; want %q", got, tt.wantMain)
			}
			if got := sqsSrv.got(); !slices.Equal(got, tt.wantSQS) {
				t.Errorf("calls on AWS_ENDPOINT_URL_SQS = %q; want %q", got, tt.wantSQS)
			}
		})
	}
}
