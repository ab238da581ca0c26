package httpsink_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/sluice-dev/sluice/pkg/adapter/httpsink"
	"github.com/sluice-dev/sluice/pkg/consume"
)

// secretStore is a Secrets Manager holding one secret.
type secretStore struct{ value string }

func (s *secretStore) GetSecretValue(context.Context, *secretsmanager.GetSecretValueInput, ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error) {
	return &secretsmanager.GetSecretValueOutput{SecretString: aws.String(s.value)}, nil
}

// The Authorization header comes from a secret (its name in
// SLUICE_HTTP_AUTH_SECRET for the functions), never from the URL; after a
// rotation the destination's 401 makes the sink read the secret again.
func ExampleNewSecretAuthorizer() {
	store := &secretStore{value: `{"authorization": "Bearer t0ken"}`}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer t0ken-2" {
			w.WriteHeader(http.StatusUnauthorized)
		}
	}))
	defer srv.Close()
	ctx := context.Background()
	auth, err := httpsink.NewSecretAuthorizer(ctx, store, "orders-api-token")
	if err != nil {
		fmt.Println(err)
		return
	}
	store.value = "Bearer t0ken-2" // rotated after the sink read it
	sink := httpsink.New(httpsink.Config{Attempts: 1, Authorizer: auth}, httpsink.NewRoundRobin(srv.URL), nil, consume.WallClock{})
	res, _ := sink.Store(ctx, []consume.Message{{ID: "m-1", Body: []byte(`{"order":1}`)}})
	fmt.Println(res[0].Outcome == consume.Stored)
	// Output: true
}
