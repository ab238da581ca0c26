package main

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sluice-dev/sluice/functions/internal/functest"
	"github.com/sluice-dev/sluice/internal/localaws"
	"github.com/sluice-dev/sluice/internal/testenv"
	"github.com/sluice-dev/sluice/internal/testfile"
	"github.com/sluice-dev/sluice/pkg/adapter/awsconf"
	"github.com/sluice-dev/sluice/pkg/adapter/mysqlsink/mysqltest"
	"github.com/sluice-dev/sluice/pkg/adapter/sqsqueue"
)

// TestBootstrapUnderRIE runs the real bootstrap (CGO_ENABLED=0, -tags
// lambda.norpc) under the Runtime Interface Emulator with the real MSK
// event of testdata/: the two good records are rows in MariaDB, the
// malformed one is in the SQS dead-letter queue once with its reason, the
// invocation succeeds, and a second delivery of the same event (a retried
// batch) duplicates nothing and dead-letters nothing again.
func TestBootstrapUnderRIE(t *testing.T) {
	testenv.AWSEndpoint(t)
	sqsEP := testenv.SQSEndpoint(t)
	dsn := mysqltest.Database(t, testenv.MySQLDSN(t))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dlq := createQueue(ctx, t, fmt.Sprintf("h17-kafka-dlq-%d-%d", os.Getpid(), time.Now().UnixNano()))
	fn, logs := functest.Bootstrap(ctx, t, "./functions/kafka-consumer", sqsEP, map[string]string{
		"SLUICE_MYSQL_DSN": dsn, "SLUICE_TABLE": fmt.Sprintf("missing-%d", os.Getpid()), "SLUICE_SAFE_RATE": "100",
		"SLUICE_DLQ_URL": dlq.url,
	})
	raw := testfile.Read(t, "testdata/msk-event.json")
	for delivery := 1; delivery <= 2; delivery++ {
		if _, err := (&localaws.RIE{URL: fn.URL}).Invoke(ctx, raw); err != nil {
			t.Fatalf("delivery %d: %v\n%s", delivery, err, logs.String())
		}
	}
	checkRows(t, dsn, "o-1001,orders/1/7")
	dead := dlq.receive(ctx, t)
	if len(dead) != 1 || dead[0].id != "orders/0/42" || !strings.HasPrefix(dead[0].reason, "malformed payload") {
		t.Errorf("dead letters = %+v; want orders/0/42 once, malformed payload", dead)
	}
	if out := logs.String(); !strings.Contains(out, `"msg":"using safe rate"`) || !strings.Contains(out, `"already_done":3`) {
		t.Errorf("bootstrap output lacks the safe rate or the second delivery's already_done 3:\n%s", out)
	}
}

func checkRows(t *testing.T, dsn, want string) {
	t.Helper()
	db := mysqltest.Conn(t, dsn)
	var ids sql.NullString
	if err := db.QueryRow("SELECT GROUP_CONCAT(id ORDER BY id) FROM messages").Scan(&ids); err != nil {
		t.Fatal(err)
	}
	if ids.String != want {
		t.Errorf("rows = %q; want %q", ids.String, want)
	}
}

// queue is a dead-letter queue on the local SQS.
type queue struct {
	api *sqs.Client
	url string
}

type deadLetter struct{ id, reason string }

func createQueue(ctx context.Context, t *testing.T, name string) queue {
	t.Helper()
	cfg, err := awsconf.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	api := sqs.NewFromConfig(cfg)
	out, err := api.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { api.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: out.QueueUrl}) })
	return queue{api: api, url: aws.ToString(out.QueueUrl)}
}

// receive reads every message of the queue with its id and reason.
func (q queue) receive(ctx context.Context, t *testing.T) []deadLetter {
	t.Helper()
	var out []deadLetter
	for {
		r, err := q.api.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &q.url, MaxNumberOfMessages: 10,
			WaitTimeSeconds: 1, MessageAttributeNames: []string{"All"}})
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Messages) == 0 {
			return out
		}
		for _, m := range r.Messages {
			a := m.MessageAttributes
			out = append(out, deadLetter{id: aws.ToString(a[sqsqueue.OriginalIDAttribute].StringValue),
				reason: aws.ToString(a[sqsqueue.ReasonAttribute].StringValue)})
		}
	}
}
