// Command rds is `make e2e-rds`: the consumers against a database set up
// as RDS would be, on this machine. A private MariaDB (its own port and
// data directory) requires TLS (require_secure_transport) on a
// certificate of a CA the run makes; `sluice migrate` creates the schema
// as an admin; the consumers connect as a user granted exactly what
// docs/controller.md lists (no CREATE, no ALTER), through an RDS-managed
// secret in the local Secrets Manager (username and password only; host,
// port and database from SLUICE_MYSQL_HOST/PORT/DATABASE). The real SQS
// Lambda bootstrap under the Runtime Interface Emulator, fed by an
// emulated event source mapping, and the real Kafka worker on the
// running broker store through it while the password is rotated
// mid-run (ALTER USER on MariaDB, PutSecretValue in Secrets Manager) and
// the open connections are killed. The last line is one JSON object;
// the exit status is 1 when it is not ok.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"time"
)

// Result is the run's JSON line.
type Result struct {
	TLSVerified         bool `json:"tls_verified"`
	PlaintextRefused    bool `json:"plaintext_refused"`
	WrongCARefused      bool `json:"wrong_ca_refused"`
	Rotated             bool `json:"rotated"`
	Sent                int  `json:"sent"`
	Stored              int  `json:"stored"`
	Missing             int  `json:"missing"`
	Duplicates          int  `json:"duplicates"`
	HealthyDeadLettered int  `json:"healthy_dead_lettered"`
	CreatePrivilege     bool `json:"create_privilege"`
	// StoredAfterRotation counts, per path, the rows stored after it.
	StoredAfterRotation map[string]int `json:"stored_after_rotation"`
	Seconds             float64        `json:"seconds"`
	Errors              []string       `json:"errors,omitempty"`
	OK                  bool           `json:"ok"`
}

// judge sets r.OK.
func (r *Result) judge() {
	r.OK = r.TLSVerified && r.PlaintextRefused && r.WrongCARefused && r.Rotated && !r.CreatePrivilege &&
		r.Sent > 0 && r.Stored == r.Sent && r.Missing == 0 && r.Duplicates == 0 && r.HealthyDeadLettered == 0 &&
		r.StoredAfterRotation["sqs_lambda"] > 0 && r.StoredAfterRotation["kafka_worker"] > 0 && len(r.Errors) == 0
}

// flags are the run's inputs.
type flags struct {
	consumer, worker, sluice, rie string
	messages                      int
	rate                          float64
	timeout                       time.Duration
	logDir, docs                  string
}

func main() {
	var f flags
	flag.StringVar(&f.consumer, "consumer", "bin/e2e/sqs-consumer/bootstrap", "SQS consumer bootstrap (host arch)")
	flag.StringVar(&f.worker, "worker", "bin/e2e/worker", "functions/worker binary")
	flag.StringVar(&f.sluice, "sluice", "bin/e2e/sluice", "the sluice command (for sluice migrate)")
	flag.StringVar(&f.rie, "rie", "", "aws-lambda-rie (default $SLUICE_RIE_BIN, .cache/bin/aws-lambda-rie)")
	flag.IntVar(&f.messages, "messages", 240, "messages per path (SQS Lambda, Kafka worker)")
	flag.Float64Var(&f.rate, "rate", 40, "RATE of the loop both paths share, messages/s")
	flag.DurationVar(&f.timeout, "timeout", 75*time.Second, "give up after this long")
	flag.StringVar(&f.docs, "docs", "docs/controller.md", "the docs whose RDS section the run executes")
	flag.StringVar(&f.logDir, "log-dir", ".cache/e2e/rds", "logs of the bootstrap and the worker")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, cancel := context.WithTimeout(context.Background(), f.timeout)
	defer cancel()
	start := time.Now()
	res := run(ctx, f, log)
	res.Seconds = time.Since(start).Seconds()
	res.judge()
	b, _ := json.Marshal(res)
	fmt.Println(string(b))
	if !res.OK {
		os.Exit(1)
	}
}
