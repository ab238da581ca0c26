// Command consumer is an SQS consumer Lambda as a team writes one without
// Sluice: it imports nothing of Sluice, only aws-lambda-go and a MySQL
// driver. Each record's order ({"order_id":N,"amount":M}) is upserted into
// the orders table of ORDERS_DSN; a record it cannot store is reported in
// batchItemFailures. WORK_MS is how long each batch also waits on a slow
// dependency of its own (a call to another service), which the database
// does not see. `make e2e-foreign` runs it under the Lambda RIE behind
// `sluice local esm --mapping`.
package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"os"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	_ "github.com/go-sql-driver/mysql"
)

type order struct {
	OrderID int64 `json:"order_id"`
	Amount  int64 `json:"amount"`
}

func main() {
	db, err := sql.Open("mysql", os.Getenv("ORDERS_DSN"))
	if err != nil {
		panic(err)
	}
	db.SetMaxOpenConns(1)
	work, _ := strconv.Atoi(os.Getenv("WORK_MS"))
	lambda.Start(func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		time.Sleep(time.Duration(work) * time.Millisecond)
		var resp events.SQSEventResponse
		for _, m := range ev.Records {
			var o order
			err := json.Unmarshal([]byte(m.Body), &o)
			if err == nil {
				_, err = db.ExecContext(ctx, `INSERT INTO orders (order_id, amount, msg_id) VALUES (?, ?, ?)
ON DUPLICATE KEY UPDATE applied = applied + 1`, o.OrderID, o.Amount, m.MessageId)
			}
			if err != nil {
				resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: m.MessageId})
			}
		}
		return resp, nil
	})
}
