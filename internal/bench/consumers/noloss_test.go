package consumers_test

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/bench/consumers"
	"github.com/sluice-dev/sluice/internal/testenv"
)

func env(t *testing.T) consumers.Env {
	t.Helper()
	ep, sqsEP := testenv.AWSEndpoint(t), testenv.SQSEndpoint(t)
	dsn := testenv.MySQLDSN(t)
	rie := testenv.Binary(t, "SLUICE_RIE_BIN", "aws-lambda-rie")
	root := testenv.ModuleRoot(t)
	return consumers.Env{
		AWSEndpoint: ep, SQSEndpoint: sqsEP, MySQLDSN: dsn, RIE: rie, MariaDBCtl: os.Getenv("SLUICE_MARIADB_CTL"),
		Root: root, WorkDir: t.TempDir(), Log: slog.New(slog.NewTextHandler(os.Stderr, nil)),
	}
}

func check(t *testing.T, got consumers.NoLoss, wantPoison int) {
	t.Helper()
	t.Logf("%+v", got)
	if got.Missing != 0 || got.Duplicates != 0 {
		t.Errorf("%s: missing %d, duplicates %d; want 0 and 0", got.Path, got.Missing, got.Duplicates)
	}
	if got.Stored != got.Sent-wantPoison {
		t.Errorf("%s: stored %d; want %d (sent %d less %d poison)", got.Path, got.Stored, got.Sent-wantPoison, got.Sent, wantPoison)
	}
	if got.Poison != wantPoison {
		t.Errorf("%s: poison in the DLQ %d; want %d", got.Path, got.Poison, wantPoison)
	}
}

// testNoLoss runs scenario with 500 messages, one in 50 poison: nothing
// lost, nothing duplicated, every poison message dead-lettered with its
// reason.
func testNoLoss(t *testing.T, name string, scenario func(context.Context, consumers.Env, consumers.Options) (consumers.NoLoss, error)) {
	t.Helper()
	e := env(t)
	o := consumers.Options{Messages: 500, PoisonEvery: 50, Rate: 500, Timeout: 10 * time.Minute}
	got, err := scenario(context.Background(), e, o)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	check(t, got, 10)
	if got.PoisonWithReason != got.Poison {
		t.Errorf("dead letters with a reason %d of %d; want all", got.PoisonWithReason, got.Poison)
	}
}

func TestNoLossSQSLambda(t *testing.T) { testNoLoss(t, "SQSLambda", consumers.SQSLambda) }

func TestNoLossSQSWorker(t *testing.T) { testNoLoss(t, "SQSWorker", consumers.SQSWorker) }
