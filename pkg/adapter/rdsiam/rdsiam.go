// Package rdsiam connects to RDS and Aurora MySQL with IAM database
// authentication: the password of each new connection is an
// authentication token, a SigV4-presigned "rds-db:connect" request for
// the database user that RDS accepts for 15 minutes after it was signed
// (github.com/aws/aws-sdk-go-v2/feature/rds/auth builds it). Tokens
// keeps one and signs a new one before it expires, so that every
// connection opens with a token still valid; connections already open
// are not affected by a token's expiry (it is checked at login only).
//
// RDS accepts a token only over TLS and as a cleartext password
// (mysql_clear_password): Apply refuses a configuration without a
// verified TLS mode and allows the cleartext plugin. The database user
// is created WITH AWSAuthenticationPlugin AS 'RDS', and the role of the
// consumer must be allowed rds-db:connect on
// arn:aws:rds-db:REGION:ACCOUNT:dbuser:RESOURCE-ID/USER.
package rdsiam

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/rds/auth"
	"github.com/go-sql-driver/mysql"
)

// Lifetime is how long RDS accepts a token after it was signed.
const Lifetime = 15 * time.Minute

// DefaultRefresh is the age at which Tokens signs a new token: well
// before Lifetime, so that a connection that takes a while to log in, or
// a clock a few minutes off, still presents a valid one.
const DefaultRefresh = 10 * time.Minute

// BuildFunc signs a token for user at endpoint (host:port) in region;
// auth.BuildAuthToken is the real one.
type BuildFunc func(ctx context.Context, endpoint, region, user string, creds aws.CredentialsProvider) (string, error)

// Tokens hands out IAM authentication tokens for one user on one
// endpoint, signing a new one when the last is Refresh old.
type Tokens struct {
	Endpoint    string                  // host:port of the instance, cluster endpoint or RDS Proxy
	Region      string                  // the database's region
	User        string                  // the database user
	Credentials aws.CredentialsProvider // the consumer's role (aws.Config.Credentials)
	Refresh     time.Duration           // default DefaultRefresh; at most Lifetime
	Now         func() time.Time        // default time.Now
	Build       BuildFunc               // default auth.BuildAuthToken

	mu     sync.Mutex
	token  string
	signed time.Time
}

// ErrNoTLS is returned by Apply for a configuration that would send the
// token without verified TLS.
var ErrNoTLS = errors.New("IAM database authentication needs TLS: set SLUICE_MYSQL_CA to the RDS CA bundle (or SLUICE_MYSQL_TLS=verify-full); the token is a password and RDS refuses it over plaintext")

// Token returns a token signed less than Refresh ago, signing one when
// needed.
func (t *Tokens) Token(ctx context.Context) (string, error) {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	refresh := t.Refresh
	if refresh <= 0 || refresh > Lifetime {
		refresh = DefaultRefresh
	}
	if t.token != "" && now.Sub(t.signed) < refresh && !now.Before(t.signed) {
		return t.token, nil
	}
	if t.Endpoint == "" || t.Region == "" || t.User == "" || t.Credentials == nil {
		return "", errors.New("IAM database authentication needs the endpoint, the region, the user and credentials")
	}
	build := t.Build
	if build == nil {
		build = func(ctx context.Context, endpoint, region, user string, creds aws.CredentialsProvider) (string, error) {
			return auth.BuildAuthToken(ctx, endpoint, region, user, creds)
		}
	}
	tok, err := build(ctx, t.Endpoint, t.Region, t.User, t.Credentials)
	if err != nil {
		return "", fmt.Errorf("sign the IAM authentication token for %s at %s: %w", t.User, t.Endpoint, err)
	}
	t.token, t.signed = tok, now
	return tok, nil
}

func (t *Tokens) now() time.Time {
	if t.Now != nil {
		return t.Now()
	}
	return time.Now()
}

// Apply makes cfg log in with t's tokens: before each new connection its
// password is a token (mysql.BeforeConnect), sent with the cleartext
// plugin RDS requires. cfg must name a registered TLS configuration (as
// mysqlsink.Conn.PrepareDSN makes) or tls=true; anything else is ErrNoTLS.
func (t *Tokens) Apply(cfg *mysql.Config) error {
	switch cfg.TLSConfig {
	case "", "false", "preferred", "skip-verify":
		return ErrNoTLS
	}
	if cfg.AllowFallbackToPlaintext {
		return ErrNoTLS
	}
	cfg.User = t.User
	cfg.AllowCleartextPasswords = true
	return cfg.Apply(mysql.BeforeConnect(func(ctx context.Context, c *mysql.Config) error {
		tok, err := t.Token(ctx)
		if err != nil {
			return err
		}
		c.Passwd = tok
		return nil
	}))
}
