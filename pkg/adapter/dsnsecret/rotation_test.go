package dsnsecret_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/go-sql-driver/mysql"

	"github.com/sluice-dev/sluice/internal/testenv"
	"github.com/sluice-dev/sluice/pkg/adapter/dsnsecret"
	"github.com/sluice-dev/sluice/pkg/adapter/mysqlsink/mysqltest"
)

func TestParseAt(t *testing.T) {
	at := dsnsecret.Endpoint{Host: "orders.cluster-abc.eu-west-1.rds.amazonaws.com", Port: "3307", DBName: "orders"}
	tests := []struct {
		name, in string
		at       dsnsecret.Endpoint
		want     string
	}{
		{"managed secret: username and password only", `{"username":"admin","password":"p"}`, at,
			"admin:p@tcp(orders.cluster-abc.eu-west-1.rds.amazonaws.com:3307)/orders?parseTime=true"},
		{"managed secret, default port", `{"username":"admin","password":"p"}`, dsnsecret.Endpoint{Host: "db", DBName: "app"},
			"admin:p@tcp(db:3306)/app?parseTime=true"},
		{"configured host over the document's (RDS Proxy)", `{"username":"u","password":"p","host":"instance","port":3306,"dbname":"app"}`,
			dsnsecret.Endpoint{Host: "proxy"}, "u:p@tcp(proxy:3306)/app?parseTime=true"},
		{"configured endpoint over a DSN", "u:p@tcp(db:3306)/app", at,
			"u:p@tcp(orders.cluster-abc.eu-west-1.rds.amazonaws.com:3307)/orders?parseTime=true"},
		{"no endpoint: as Parse", "u:p@tcp(db:3306)/app", dsnsecret.Endpoint{}, "u:p@tcp(db:3306)/app?parseTime=true"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := dsnsecret.ParseAt(tt.in, tt.at)
			if err != nil || got != tt.want {
				t.Errorf("ParseAt(%q, %+v) = %q, %v; want %q", tt.in, tt.at, got, err, tt.want)
			}
		})
	}
	_, err := dsnsecret.ParseAt(`{"username":"u","password":"secret-pw"}`, dsnsecret.Endpoint{})
	if !errors.Is(err, dsnsecret.ErrMalformed) || !strings.Contains(err.Error(), "host") || strings.Contains(err.Error(), "secret-pw") {
		t.Errorf("ParseAt(document without host, no endpoint) = %v; want ErrMalformed naming the missing host, not quoting the secret", err)
	}
}

// rotatingAPI is a Secrets Manager fake whose value the test changes, as a
// rotation does; it counts the reads.
type rotatingAPI struct {
	mu    sync.Mutex
	value string
	reads int
}

func (f *rotatingAPI) set(v string) { f.mu.Lock(); f.value = v; f.mu.Unlock() }

func (f *rotatingAPI) count() int { f.mu.Lock(); defer f.mu.Unlock(); return f.reads }

func (f *rotatingAPI) GetSecretValue(_ context.Context, _ *secretsmanager.GetSecretValueInput, _ ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	return &secretsmanager.GetSecretValueOutput{SecretString: aws.String(f.value)}, nil
}

// TestConnectorFollowsRotation: the password changes on MariaDB and in
// the secret mid-run; the next connection fails authentication (1045),
// the connector re-reads the secret once and connects with the new
// password. A password changed on the server alone still fails, with the
// database's 1045 and one more read, not a loop.
func TestConnectorFollowsRotation(t *testing.T) {
	dsn := mysqltest.Database(t, testenv.MySQLDSN(t))
	admin := mysqltest.RootSocket(t, "")
	user, userDSN := mysqltest.User(t, admin, dsn, "first-pw", "")
	cfg, err := mysql.ParseDSN(userDSN)
	if err != nil {
		t.Fatal(err)
	}
	host, port, _ := strings.Cut(cfg.Addr, ":")
	// An RDS-managed secret: the credentials only; where from configuration.
	doc := func(pw string) string { return fmt.Sprintf(`{"username":%q,"password":%q}`, user, pw) }
	api := &rotatingAPI{value: doc("first-pw")}
	ctx := context.Background()
	conn, err := dsnsecret.Source{API: api, SecretID: "db", At: dsnsecret.Endpoint{Host: host, Port: port, DBName: cfg.DBName}}.Connector(ctx)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(conn)
	defer db.Close()
	db.SetMaxIdleConns(0) // every query connects anew
	if err := db.PingContext(ctx); err != nil {
		t.Fatalf("ping before the rotation: %v", err)
	}

	if err := admin(fmt.Sprintf("ALTER USER '%s'@'%%' IDENTIFIED BY 'second-pw'", user)); err != nil {
		t.Fatal(err)
	}
	api.set(doc("second-pw"))
	if _, err := db.ExecContext(ctx, "INSERT INTO messages (id, body) VALUES ('m1', '{}')"); err != nil {
		t.Fatalf("insert after the rotation = %v; want the connector to re-read the secret and store", err)
	}
	if got := api.count(); got != 2 {
		t.Errorf("secret reads = %d; want 2 (at start, after the 1045)", got)
	}

	if err := admin(fmt.Sprintf("ALTER USER '%s'@'%%' IDENTIFIED BY 'third-pw'", user)); err != nil {
		t.Fatal(err)
	}
	err = db.PingContext(ctx)
	var me *mysql.MySQLError
	if !errors.As(err, &me) || me.Number != 1045 {
		t.Errorf("ping with a secret the server no longer accepts = %v; want MySQL error 1045", err)
	}
	if got := api.count(); got != 3 {
		t.Errorf("secret reads = %d; want 3 (one re-read for the failed connection)", got)
	}
}
