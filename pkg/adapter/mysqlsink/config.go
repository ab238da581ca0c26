package mysqlsink

import (
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/internal/defaults"
)

// DefaultRetention is how long inbox rows are kept when Config.Retention is
// zero: a redelivery older than this is no longer recognised as a
// duplicate.
const DefaultRetention = 7 * 24 * time.Hour

// Config configures a Sink.
type Config struct {
	// Statement is the SQL applied to each message, one or more statements
	// separated by semicolons, with named placeholders bound as parameters:
	// :id (the message id), :body (the raw body), :json.PATH (a value of the
	// JSON body, e.g. :json.customer.id; digits index arrays) and
	// :attr.NAME (an SQS message attribute or a Kafka header). Empty means
	// the default table: INSERT INTO <prefix>messages (id, body).
	Statement string
	// Prefix is put before the names of the tables Sluice creates (the
	// inbox, the default messages table, the migrations record) and of its
	// migration lock, so that two deployments can share a database. Letters,
	// digits and underscores, at most 32.
	Prefix string
	// Loop is recorded with each inbox row (which loop stored the message).
	Loop string
	// Retention is how long inbox rows are kept (default 7 days); older
	// rows are removed in small chunks by the sink's Pruner.
	Retention time.Duration
	// NoPrune turns the Pruner off: the consumer's user then needs no
	// DELETE on the inbox, and old rows are removed another way (a
	// partition dropped, or an event of the database's scheduler).
	NoPrune bool
	// NoInbox turns the inbox off (SLUICE_MYSQL_INBOX=off): each batch
	// runs the statements alone, and a redelivered message runs them again
	// (InboxOffGivesUp says what else is given up). The sink refuses it
	// unless every statement is an upsert (INSERT ... ON DUPLICATE KEY
	// UPDATE, or REPLACE) or Idempotent is set.
	NoInbox bool
	// Idempotent is the operator's assertion that the statements are
	// idempotent though not upserts by their form
	// (SLUICE_MYSQL_IDEMPOTENT=asserted): an UPDATE that sets values, for
	// example. It matters only with NoInbox.
	Idempotent bool
	// Now is the clock of the inbox's times (default time.Now).
	Now func() time.Time
	// Log receives the sink's warnings (nil: discarded).
	Log *slog.Logger
	// OrderingAttempts is the delivery (consume.Message.ReceiveCount) on
	// which a message refused for a missing parent row (a foreign key,
	// MySQL errors 1452 and 1216) becomes poison; before it the message is
	// retryable, as its parent may not be stored yet (children before
	// parents, without ordering). Default DefaultOrderingAttempts; keep it
	// below the queue's maxReceiveCount, so that the message reaches the
	// dead-letter queue with its reason. A source that does not count
	// deliveries (ReceiveCount 0) gets poison at once.
	OrderingAttempts int
	// OrderingWait is how long since its first delivery
	// (consume.Message.FirstReceivedAt) a message refused for a missing
	// parent row stays retryable, whatever its delivery: a source whose
	// deliveries come seconds apart (Kafka's retry backoff) reaches
	// OrderingAttempts before a parent on another partition is stored.
	// Default DefaultOrderingWait. A message whose first delivery is not
	// known is judged by OrderingAttempts alone.
	OrderingWait time.Duration
}

// DefaultOrderingAttempts is Config.OrderingAttempts' default: poison on
// the third delivery, below SQS's usual maxReceiveCount of 5 and Kafka's
// 10 attempts.
const DefaultOrderingAttempts = 3

// DefaultOrderingWait is Config.OrderingWait's default: 45 s, no sooner
// than SQS's third delivery comes anyway (15-30 s after the first, then
// 30-60 s: sqsqueue.DefaultRetryBackoff), so that on SQS the deliveries
// decide; on Kafka it spans about six retries.
const DefaultOrderingWait = 45 * time.Second

var prefixRE = regexp.MustCompile(`^[A-Za-z0-9_]{0,32}$`)

func (c Config) withDefaults() (Config, error) {
	if !prefixRE.MatchString(c.Prefix) {
		return c, fmt.Errorf("mysql table prefix %q: want at most 32 letters, digits or underscores", c.Prefix)
	}
	if len(c.Loop) > 255 {
		return c, fmt.Errorf("loop id of %d bytes: the inbox keeps at most 255", len(c.Loop))
	}
	if c.Retention < 0 {
		return c, fmt.Errorf("inbox retention %v: want a positive duration", c.Retention)
	}
	c.OrderingAttempts = defaults.Positive(c.OrderingAttempts, DefaultOrderingAttempts)
	c.OrderingWait = defaults.Positive(c.OrderingWait, DefaultOrderingWait)
	if c.Retention == 0 {
		c.Retention = DefaultRetention
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	return c, nil
}

// names are the identifiers of what Sluice creates in the database, after
// the prefix. They are spliced into SQL, which is safe because the prefix
// is restricted to [A-Za-z0-9_].
type names struct {
	inbox, messages, migrations, lock string
}

func namesFor(prefix string) names {
	return names{
		inbox:      prefix + "sluice_inbox",
		messages:   prefix + "messages",
		migrations: prefix + "schema_migrations",
		lock:       prefix + "sluice_migrate",
	}
}

// The environment variables of ConfigFromEnv.
const (
	EnvStatement     = "SLUICE_MYSQL_STATEMENT"
	EnvStatementFile = "SLUICE_MYSQL_STATEMENT_FILE"
	EnvPrefix        = "SLUICE_MYSQL_PREFIX"
	EnvRetention     = "SLUICE_MYSQL_INBOX_RETENTION"
	EnvPrune         = "SLUICE_MYSQL_INBOX_PRUNE"
	EnvInbox         = "SLUICE_MYSQL_INBOX"
	EnvIdempotent    = "SLUICE_MYSQL_IDEMPOTENT"
)

// ConfigFromEnv reads the sink's configuration the way every Sluice
// consumer does: SLUICE_MYSQL_STATEMENT (or SLUICE_MYSQL_STATEMENT_FILE, a
// file of one or more statements), SLUICE_MYSQL_PREFIX and
// SLUICE_MYSQL_INBOX_RETENTION (a duration such as 168h, or days such as
// 7d), SLUICE_MYSQL_INBOX_PRUNE (on, the default, or off: NoPrune),
// SLUICE_MYSQL_INBOX (on, the default, or off: NoInbox) and
// SLUICE_MYSQL_IDEMPOTENT (asserted: Idempotent). The caller sets Loop.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	c := Config{Statement: getenv(EnvStatement), Prefix: getenv(EnvPrefix)}
	if f := getenv(EnvStatementFile); f != "" {
		if c.Statement != "" {
			return c, fmt.Errorf("set %s or %s, not both", EnvStatement, EnvStatementFile)
		}
		b, err := os.ReadFile(f)
		if err != nil {
			return c, fmt.Errorf("%s: %w", EnvStatementFile, err)
		}
		c.Statement = string(b)
	}
	if c.Statement != "" {
		if _, err := parseStatements(c.Statement); err != nil {
			return c, err
		}
	}
	if v := getenv(EnvRetention); v != "" {
		d, err := ParseRetention(v)
		if err != nil {
			return c, fmt.Errorf("%s=%q: %w", EnvRetention, v, err)
		}
		c.Retention = d
	}
	switch v := getenv(EnvPrune); v {
	case "", "on":
	case "off":
		c.NoPrune = true
	default:
		return c, fmt.Errorf("%s=%q: want on or off", EnvPrune, v)
	}
	if !prefixRE.MatchString(c.Prefix) {
		return c, fmt.Errorf("%s=%q: want at most 32 letters, digits or underscores", EnvPrefix, c.Prefix)
	}
	return c, inboxFromEnv(getenv, &c)
}

// inboxFromEnv reads SLUICE_MYSQL_INBOX and SLUICE_MYSQL_IDEMPOTENT into c.
func inboxFromEnv(getenv func(string) string, c *Config) error {
	switch v := getenv(EnvInbox); v {
	case "", "on":
	case "off":
		c.NoInbox = true
	default:
		return fmt.Errorf("%s=%q: want on or off", EnvInbox, v)
	}
	switch v := getenv(EnvIdempotent); v {
	case "":
	case "asserted":
		c.Idempotent = true
	default:
		return fmt.Errorf("%s=%q: want asserted (the statement is idempotent) or nothing", EnvIdempotent, v)
	}
	if c.NoInbox {
		stmts, err := parseStatements(or(c.Statement, defaultStatement(namesFor(c.Prefix))))
		if err != nil {
			return err
		}
		return checkNoInbox(*c, stmts)
	}
	return nil
}

func or(a, b string) string {
	if strings.TrimSpace(a) != "" {
		return a
	}
	return b
}

// ParseRetention reads a positive duration: Go's syntax (168h, 90m) or a
// whole number of days (7d).
func ParseRetention(v string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(v, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n <= 0 {
			return 0, fmt.Errorf("want a positive number of days such as 7d")
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("want a positive duration such as 168h or 7d")
	}
	return d, nil
}
