package mysqlsink_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sluice-dev/sluice/internal/testenv"
	"github.com/sluice-dev/sluice/pkg/adapter/mysqlsink"
	"github.com/sluice-dev/sluice/pkg/adapter/mysqlsink/mysqltest"
	"github.com/sluice-dev/sluice/pkg/consume"
)

func TestInboxOffNeedsAnUpsert(t *testing.T) {
	tests := []struct {
		name, statement, idempotent string
		wantErr                     string
	}{
		{"default table (an upsert)", "", "", ""},
		{"upsert", "INSERT INTO orders (id, total) VALUES (:id, :json.total) ON DUPLICATE KEY UPDATE total = VALUES(total)", "", ""},
		{"replace", "REPLACE INTO orders (id, total) VALUES (:id, :json.total)", "", ""},
		{"lower case, comments", "/* keyed on id */ insert into orders (id) values (:id) on duplicate key update id = id", "", ""},
		{"plain insert", "INSERT INTO orders (id, total) VALUES (:id, :json.total)", "", "statement 1 is not an upsert"},
		{"the words in a string only", "INSERT INTO notes (id, txt) VALUES (:id, 'ON DUPLICATE KEY UPDATE')", "", "not an upsert"},
		{"an update", "UPDATE orders SET status = :json.status WHERE id = :id", "", "SLUICE_MYSQL_IDEMPOTENT=asserted"},
		{"an update, asserted", "UPDATE orders SET status = :json.status WHERE id = :id", "asserted", ""},
		{"second statement not an upsert", "REPLACE INTO a (id) VALUES (:id); INSERT INTO log (id) VALUES (:id)", "", "statement 2"},
		{"bad assertion", "", "yes", "SLUICE_MYSQL_IDEMPOTENT"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{mysqlsink.EnvInbox: "off", mysqlsink.EnvStatement: tt.statement, mysqlsink.EnvIdempotent: tt.idempotent}
			c, err := mysqlsink.ConfigFromEnv(func(k string) string { return env[k] })
			if (err == nil) != (tt.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("ConfigFromEnv(%v) = %v; want error containing %q", env, err, tt.wantErr)
			}
			if err == nil && !c.NoInbox {
				t.Errorf("ConfigFromEnv(%v).NoInbox = false", env)
			}
		})
	}
	if _, err := mysqlsink.ConfigFromEnv(func(k string) string { return map[string]string{mysqlsink.EnvInbox: "maybe"}[k] }); err == nil {
		t.Error("SLUICE_MYSQL_INBOX=maybe accepted")
	}
}

// TestStoreWithoutInbox: with the inbox off, a user granted nothing on
// the inbox stores through the default upsert, a redelivery changes
// nothing, no inbox row is written, and the start says what is given up.
func TestStoreWithoutInbox(t *testing.T) {
	dsn := mysqltest.Database(t, testenv.MySQLDSN(t))
	admin := mysqltest.RootSocket(t, "")
	cfg, _ := mysql.ParseDSN(dsn)
	user := fmt.Sprintf("sl_ni%d", time.Now().UnixNano()%1e12)
	if err := admin(fmt.Sprintf("DROP USER IF EXISTS '%[1]s'@'%%'; CREATE USER '%[1]s'@'%%' IDENTIFIED BY 'pw'; GRANT SELECT, INSERT, UPDATE ON `%[2]s`.messages TO '%[1]s'@'%%'", user, cfg.DBName)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin(fmt.Sprintf("DROP USER IF EXISTS '%s'@'%%'", user)) })
	cfg.User, cfg.Passwd = user, "pw"
	db := mysqltest.Conn(t, cfg.FormatDSN())
	var logged bytes.Buffer
	ctx := context.Background()
	sink, err := mysqlsink.Prepare(ctx, db, mysqlsink.Config{NoInbox: true, Log: slog.New(slog.NewTextHandler(&logged, nil))})
	if err != nil {
		t.Fatalf("Prepare without inbox, as a user with no inbox rights: %v", err)
	}
	if !strings.Contains(logged.String(), "inbox off") || !strings.Contains(logged.String(), "runs the statement again") {
		t.Errorf("start log %q; want it to say the inbox is off and what is given up", logged.String())
	}
	pruner := sink.StartPruner(mysqlsink.PruneConfig{})
	defer pruner.Stop()
	msgs := []consume.Message{{ID: "a", Body: []byte(`{"seq":1}`)}, {ID: "b", Body: []byte(`{"seq":2}`)}}
	for round := range 2 { // the second is a redelivery
		res, err := sink.Store(ctx, msgs)
		if err != nil || res[0].Outcome != consume.Stored || res[1].Outcome != consume.Stored {
			t.Fatalf("Store round %d = %+v, %v; want both stored", round+1, res, err)
		}
	}
	rootDB := mysqltest.Conn(t, dsn)
	var stored, inbox int
	if err := rootDB.QueryRow("SELECT (SELECT COUNT(*) FROM messages), (SELECT COUNT(*) FROM sluice_inbox)").Scan(&stored, &inbox); err != nil {
		t.Fatal(err)
	}
	if stored != 2 || inbox != 0 {
		t.Errorf("after a redelivery: %d messages, %d inbox rows; want 2 and 0", stored, inbox)
	}
}
