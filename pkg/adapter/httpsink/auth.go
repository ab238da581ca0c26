package httpsink

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
)

// Authorizer supplies the Authorization header of every request from a
// secret store. Authorization returns the header's value; stale, when not
// empty, is a value the destination refused (401): the Authorizer reads
// the secret again unless another request has already replaced that value
// (so that a batch of 401s costs one read). Errors never quote the secret.
type Authorizer interface {
	Authorization(ctx context.Context, stale string) (string, error)
}

// SecretsAPI is the part of the Secrets Manager client SecretAuthorizer uses.
type SecretsAPI interface {
	GetSecretValue(ctx context.Context, in *secretsmanager.GetSecretValueInput, opts ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error)
}

var (
	_ SecretsAPI = (*secretsmanager.Client)(nil)
	_ Authorizer = (*SecretAuthorizer)(nil)
)

// SecretAuthorizer is an Authorizer over a Secrets Manager secret (name or
// ARN) that holds the header's value ("Bearer ...", "Basic ..."), or a JSON
// document with it in "authorization". It keeps the value it read and
// reads the secret again only after the destination refused that value.
type SecretAuthorizer struct {
	api      SecretsAPI
	secretID string
	mu       sync.Mutex
	value    string
}

// NewSecretAuthorizer reads the secret once, so that a missing secret or
// a refused read fails at start, and returns the Authorizer.
func NewSecretAuthorizer(ctx context.Context, api SecretsAPI, secretID string) (*SecretAuthorizer, error) {
	if secretID == "" {
		return nil, errors.New("authorization secret: the secret's name or ARN is empty")
	}
	a := &SecretAuthorizer{api: api, secretID: secretID}
	if _, err := a.Authorization(ctx, ""); err != nil {
		return nil, err
	}
	return a, nil
}

// Authorization returns the header's value, read again from the secret
// when it is stale (the value the destination refused).
func (a *SecretAuthorizer) Authorization(ctx context.Context, stale string) (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.value != "" && (stale == "" || stale != a.value) {
		return a.value, nil
	}
	out, err := a.api.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(a.secretID)})
	if err != nil {
		return "", fmt.Errorf("read the Authorization secret %s: %w", a.secretID, err)
	}
	v, err := headerValue(aws.ToString(out.SecretString))
	if err != nil {
		return "", fmt.Errorf("the Authorization secret %s: %w", a.secretID, err)
	}
	a.value = v
	return v, nil
}

// headerValue is the Authorization value a secret holds: the string
// itself, or the "authorization" field of a JSON document.
func headerValue(s string) (string, error) {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "{") {
		var doc struct {
			Authorization string `json:"authorization"`
		}
		if json.Unmarshal([]byte(s), &doc) != nil || doc.Authorization == "" {
			return "", errors.New(`holds a JSON document without an "authorization" string; want the header's value or {"authorization": "..."}`)
		}
		s = strings.TrimSpace(doc.Authorization)
	}
	if s == "" || strings.ContainsAny(s, "\r\n") {
		return "", errors.New("holds no usable header value (empty, or a line break); want e.g. \"Bearer <token>\"")
	}
	return s, nil
}

// scrub replaces every occurrence of the Authorization value auth, and of
// its credentials after the scheme, in s: a destination that echoes the
// header in its answer must not put it in a reason.
func scrub(s, auth string) string {
	if auth == "" {
		return s
	}
	s = strings.ReplaceAll(s, auth, "REDACTED")
	if _, cred, ok := strings.Cut(auth, " "); ok && len(cred) >= 4 {
		s = strings.ReplaceAll(s, cred, "REDACTED")
	}
	return s
}
