package mysqlsink_test

import (
	"fmt"

	"github.com/sluice-dev/sluice/pkg/adapter/mysqlsink"
)

// A consumer reads the sink's configuration from its environment; the
// statement is checked for unknown placeholders at once, and against the
// database by Prepare (or Start) when the consumer starts.
func ExampleConfigFromEnv() {
	env := map[string]string{
		"SLUICE_MYSQL_STATEMENT": `INSERT INTO orders (order_id, customer, total)
VALUES (:json.order_id, :json.customer, :json.total)
ON DUPLICATE KEY UPDATE total = VALUES(total)`,
		"SLUICE_MYSQL_PREFIX":          "shop_",
		"SLUICE_MYSQL_INBOX_RETENTION": "14d",
	}
	cfg, err := mysqlsink.ConfigFromEnv(func(k string) string { return env[k] })
	fmt.Println(cfg.Prefix, cfg.Retention, err)

	env["SLUICE_MYSQL_STATEMENT"] = "INSERT INTO orders (order_id) VALUES (:json.order_id, :customer)"
	_, err = mysqlsink.ConfigFromEnv(func(k string) string { return env[k] })
	fmt.Println(err)
	// Output:
	// shop_ 336h0m0s <nil>
	// mysql statement: unknown placeholder :customer at offset 54: want :id, :body, :json.PATH or :attr.NAME
}
