package testenv

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// listen returns the URL of a listener that accepts connections until the
// test ends.
func listen(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return "http://" + l.Addr().String()
}

// TestSQSEndpoint: SQS's own variable wins, as in the AWS SDK; without it
// SQS is on the endpoint of every service.
func TestSQSEndpoint(t *testing.T) {
	all, sqs := listen(t), listen(t)
	tests := []struct {
		name, sqsVar, want string
	}{
		{"AWS_ENDPOINT_URL_SQS set", sqs, sqs},
		{"AWS_ENDPOINT_URL_SQS unset", "", all},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("AWS_ENDPOINT_URL", all)
			t.Setenv("AWS_ENDPOINT_URL_SQS", tt.sqsVar)
			if got := SQSEndpoint(t); got != tt.want {
				t.Errorf("SQSEndpoint() = %q; want %q", got, tt.want)
			}
			if got := AWSEndpoint(t); got != all {
				t.Errorf("AWSEndpoint() = %q; want %q", got, all)
			}
		})
	}
}

func TestModuleRoot(t *testing.T) {
	root := ModuleRoot(t)
	b, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil || !strings.HasPrefix(string(b), "module github.com/sluice-dev/sluice\n") {
		t.Fatalf("ModuleRoot = %s: go.mod %q, %v; want the module's", root, b, err)
	}
}
