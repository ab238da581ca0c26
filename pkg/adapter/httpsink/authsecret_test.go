package httpsink_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconf "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/sluice-dev/sluice/internal/testenv"
	"github.com/sluice-dev/sluice/pkg/adapter/httpsink"
	"github.com/sluice-dev/sluice/pkg/consume"
)

// countingAPI counts the reads of the secret.
type countingAPI struct {
	httpsink.SecretsAPI
	mu    sync.Mutex
	reads int
}

func (c *countingAPI) GetSecretValue(ctx context.Context, in *secretsmanager.GetSecretValueInput, opts ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error) {
	c.mu.Lock()
	c.reads++
	c.mu.Unlock()
	return c.SecretsAPI.GetSecretValue(ctx, in, opts...)
}

// guarded is a destination that wants Authorization = want, answers 401
// otherwise, and echoes the header it got in its 400 to "poison".
type guarded struct {
	mu   sync.Mutex
	want string
}

func (g *guarded) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	want := g.want
	g.mu.Unlock()
	got := r.Header.Get("Authorization")
	buf := make([]byte, 16)
	n, _ := r.Body.Read(buf)
	switch {
	case got != want:
		http.Error(w, "bad credentials "+got, http.StatusUnauthorized)
	case string(buf[:n]) == "poison":
		http.Error(w, "refused; you sent "+got, http.StatusBadRequest)
	}
}

// TestSinkAuthorizationFromSecretsManager, on moto's Secrets Manager: the
// Authorization header comes from the secret, read once at start; after a
// rotation the destination's first 401 makes the sink read it again, once,
// and retry; no reason (401, a 400 whose body echoes the header) holds the
// secret.
func TestSinkAuthorizationFromSecretsManager(t *testing.T) {
	testenv.AWSEndpoint(t)
	for k, v := range map[string]string{"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_REGION": "us-east-1"} {
		t.Setenv(k, v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg, err := awsconf.LoadDefaultConfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sm := secretsmanager.NewFromConfig(cfg)
	name := "sluice-http-auth-" + strings.ReplaceAll(time.Now().Format("150405.000000"), ".", "")
	if _, err := sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String(name), SecretString: aws.String("Bearer first-s3cr3t")}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sm.DeleteSecret(context.Background(), &secretsmanager.DeleteSecretInput{SecretId: aws.String(name), ForceDeleteWithoutRecovery: aws.Bool(true)})
	})
	dest := &guarded{want: "Bearer first-s3cr3t"}
	srv := httptest.NewServer(dest)
	defer srv.Close()
	api := &countingAPI{SecretsAPI: sm}
	auth, err := httpsink.NewSecretAuthorizer(ctx, api, name)
	if err != nil {
		t.Fatalf("NewSecretAuthorizer: %v", err)
	}
	s := httpsink.New(httpsink.Config{Attempts: 1, Authorizer: auth}, httpsink.NewRoundRobin(srv.URL), nil, &noSleep{})
	store := func(body string) consume.Result {
		res, _ := s.Store(ctx, []consume.Message{{ID: "m-" + body, Body: []byte(body)}})
		return res[0]
	}
	if r := store("a"); r.Outcome != consume.Stored {
		t.Fatalf("first store: %+v; want stored with the secret's header", r)
	}
	if _, err := sm.PutSecretValue(ctx, &secretsmanager.PutSecretValueInput{SecretId: aws.String(name), SecretString: aws.String("Bearer second-s3cr3t")}); err != nil {
		t.Fatal(err)
	}
	dest.mu.Lock()
	dest.want = "Bearer second-s3cr3t"
	dest.mu.Unlock()
	if r := store("b"); r.Outcome != consume.Stored {
		t.Errorf("store after a rotation: %+v; want stored after one re-read on the 401", r)
	}
	if api.reads != 2 {
		t.Errorf("secret read %d times; want 2 (at start, once after the 401)", api.reads)
	}
	for _, tt := range []struct{ name, want, body string }{
		{"refused credentials", "Bearer third", "c"},
		{"echoed in a 400", "Bearer second-s3cr3t", "poison"},
	} {
		dest.mu.Lock()
		dest.want = tt.want
		dest.mu.Unlock()
		r := store(tt.body)
		if r.Outcome == consume.Stored || strings.Contains(r.Reason, "s3cr3t") || r.Reason == "" {
			t.Errorf("%s: %+v; want a failure whose reason holds no secret", tt.name, r)
		}
	}
}
