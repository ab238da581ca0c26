package rdsiam_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/feature/rds/auth"
	"github.com/go-sql-driver/mysql"

	"github.com/sluice-dev/sluice/internal/testenv"
	"github.com/sluice-dev/sluice/pkg/adapter/mysqlsink"
	"github.com/sluice-dev/sluice/pkg/adapter/mysqlsink/mysqltest"
	"github.com/sluice-dev/sluice/pkg/adapter/rdsiam"
)

// clock is a fake clock the test moves.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }
func newClock() *clock               { return &clock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)} }
func static() aws.CredentialsProvider {
	return credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", "")
}
func counting(n *int) rdsiam.BuildFunc {
	return func(_ context.Context, endpoint, region, user string, _ aws.CredentialsProvider) (string, error) {
		*n++
		return fmt.Sprintf("%s/%s/%s/%d", endpoint, region, user, *n), nil
	}
}

func TestTokensRefreshBeforeExpiry(t *testing.T) {
	c, built := newClock(), 0
	tk := &rdsiam.Tokens{Endpoint: "db:3306", Region: "eu-west-1", User: "app", Credentials: static(), Now: c.Now, Build: counting(&built)}
	ctx := context.Background()
	first, err := tk.Token(ctx)
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		advance time.Duration
		signs   int
	}{
		{time.Minute, 1},                         // young: the same token
		{rdsiam.DefaultRefresh - time.Minute, 2}, // Refresh old: signed anew, 5 minutes before RDS would refuse it
		{rdsiam.Lifetime, 3},                     // long idle (a frozen Lambda): never the expired one
	}
	for _, s := range steps {
		c.Add(s.advance)
		tok, err := tk.Token(ctx)
		if err != nil || built != s.signs {
			t.Errorf("after %v: Token() = %q, %v with %d signatures; want %d", s.advance, tok, err, built, s.signs)
		}
		if s.signs == 1 && tok != first {
			t.Errorf("a token %v old was signed anew", s.advance)
		}
	}
}

func TestTokenIsAnRDSConnectPresignature(t *testing.T) {
	tk := &rdsiam.Tokens{Endpoint: "orders.cluster-abc.eu-west-1.rds.amazonaws.com:3306", Region: "eu-west-1", User: "sluice_iam", Credentials: static()}
	tok, err := tk.Token(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse("https://" + tok)
	if err != nil {
		t.Fatalf("token %q is not a URL: %v", tok, err)
	}
	q := u.Query()
	want := map[string]string{"Action": "connect", "DBUser": "sluice_iam", "X-Amz-Expires": "900", "X-Amz-Algorithm": "AWS4-HMAC-SHA256"}
	for k, v := range want {
		if q.Get(k) != v {
			t.Errorf("token's %s = %q; want %q", k, q.Get(k), v)
		}
	}
	if cred := q.Get("X-Amz-Credential"); !strings.HasPrefix(cred, "AKIDEXAMPLE/") || !strings.HasSuffix(cred, "/eu-west-1/rds-db/aws4_request") {
		t.Errorf("token's credential scope = %q; want AKIDEXAMPLE/<date>/eu-west-1/rds-db/aws4_request", cred)
	}
	if u.Host != "orders.cluster-abc.eu-west-1.rds.amazonaws.com:3306" || q.Get("X-Amz-Signature") == "" {
		t.Errorf("token host %q, signature %q", u.Host, q.Get("X-Amz-Signature"))
	}
}

func TestApplyRefusesWithoutTLS(t *testing.T) {
	tk := &rdsiam.Tokens{Endpoint: "db:3306", Region: "us-east-1", User: "app", Credentials: static()}
	for _, dsn := range []string{"app@tcp(db:3306)/orders", "app@tcp(db:3306)/orders?tls=false", "app@tcp(db:3306)/orders?tls=preferred", "app@tcp(db:3306)/orders?tls=skip-verify"} {
		cfg, err := mysql.ParseDSN(dsn)
		if err != nil {
			t.Fatal(err)
		}
		if err := tk.Apply(cfg); !errors.Is(err, rdsiam.ErrNoTLS) || !strings.Contains(err.Error(), "SLUICE_MYSQL_CA") {
			t.Errorf("Apply(%s) = %v; want ErrNoTLS naming SLUICE_MYSQL_CA", dsn, err)
		}
	}
}

// TestServerReceivesTheToken: over verified TLS to a MariaDB that
// requires it, every new connection logs in with the token Tokens holds,
// signed by the real SDK with static credentials. MariaDB cannot verify a
// SigV4 signature as RDS does, so the test stands in for RDS's check by
// making each token signed the user's password as it is signed: a login
// succeeds only when the driver sent exactly that token. After the
// refresh age a new connection brings a newly signed token.
func TestServerReceivesTheToken(t *testing.T) {
	testenv.MySQLDSN(t)
	srv := mysqltest.StartTLSServer(t)
	if err := srv.Admin("CREATE DATABASE orders; CREATE USER 'sluice_iam'@'%' IDENTIFIED BY 'unused'; GRANT SELECT ON orders.* TO 'sluice_iam'@'%'"); err != nil {
		t.Fatal(err)
	}
	c := newClock()
	var signed []string
	tk := &rdsiam.Tokens{Endpoint: srv.Addr, Region: "us-east-1", User: "sluice_iam", Credentials: static(), Now: c.Now,
		Build: func(ctx context.Context, endpoint, region, user string, creds aws.CredentialsProvider) (string, error) {
			tok, err := auth.BuildAuthToken(ctx, endpoint, region, user, creds)
			if err == nil {
				signed = append(signed, tok)
				err = srv.Admin(fmt.Sprintf("ALTER USER 'sluice_iam'@'%%' IDENTIFIED BY '%s'", tok)) // RDS: the token is valid
			}
			return tok, err
		}}
	dsn, err := mysqlsink.Conn{CA: srv.CA}.PrepareDSN("sluice_iam@tcp(" + srv.Addr + ")/orders")
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := mysql.ParseDSN(dsn)
	if err := tk.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(conn)
	defer db.Close()
	db.SetMaxIdleConns(0) // every ping logs in anew
	ctx := context.Background()
	for i, advance := range []time.Duration{0, time.Minute, rdsiam.DefaultRefresh} {
		c.Add(advance)
		if err := db.PingContext(ctx); err != nil {
			t.Fatalf("login %d (clock +%v) = %v; want the token accepted", i+1, advance, err)
		}
	}
	if len(signed) != 2 {
		t.Errorf("tokens signed = %d; want 2 (at the first login, after the refresh age)", len(signed))
	}
	// The stand-in is honest: a login without the token is refused.
	plain, _ := mysql.ParseDSN(dsn)
	plain.Passwd = "not-the-token"
	pc, _ := mysql.NewConnector(plain)
	other := sql.OpenDB(pc)
	defer other.Close()
	var me *mysql.MySQLError
	if err := other.PingContext(ctx); !errors.As(err, &me) || me.Number != 1045 {
		t.Errorf("login with another password = %v; want 1045", err)
	}
}
