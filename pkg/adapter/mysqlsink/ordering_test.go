package mysqlsink_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/adapter/mysqlsink"
	"github.com/sluice-dev/sluice/pkg/consume"
)

// TestMissingParentIsRetriedThenPoison: a child stored before its parent
// (MySQL error 1452, a foreign key with no parent row: common when the
// queue does not keep order) is handed back for a retry on its first
// deliveries, not dead-lettered, and stores once its parent is in; a
// child whose parent never comes is poison on its OrderingAttempts-th
// delivery, with a reason that names the missing parent. The other
// messages of the batch are stored either way.
func TestMissingParentIsRetriedThenPoison(t *testing.T) {
	db := userDB(t, "CREATE TABLE parents (id INT PRIMARY KEY) ENGINE=InnoDB",
		"CREATE TABLE children (id INT PRIMARY KEY, parent INT NOT NULL, FOREIGN KEY (parent) REFERENCES parents (id)) ENGINE=InnoDB",
		"INSERT INTO parents VALUES (1)")
	s := prepare(t, db, mysqlsink.Config{Statement: "INSERT INTO children (id, parent) VALUES (:json.id, :json.parent)"})
	child := func(id, parent, delivery int) consume.Message {
		return consume.Message{ID: fmt.Sprintf("c-%d-%d", id, delivery), Body: fmt.Appendf(nil, `{"id":%d,"parent":%d}`, id, parent), ReceiveCount: delivery}
	}
	store := func(msgs ...consume.Message) []consume.Result {
		t.Helper()
		res, err := s.Store(context.Background(), msgs)
		if err != nil {
			t.Fatalf("Store: %v", err)
		}
		return res
	}
	res := store(child(10, 1, 1), child(11, 2, 1))
	if res[0].Outcome != consume.Stored || res[1].Outcome != consume.Retryable || !res[1].Waiting || !strings.Contains(res[1].Reason, "parent") {
		t.Fatalf("a child with its parent and one before it, first delivery: %+v; want stored and retryable, waiting (parent missing)", res)
	}
	if _, err := db.Exec("INSERT INTO parents VALUES (2)"); err != nil {
		t.Fatal(err)
	}
	if res := store(child(11, 2, 2)); res[0].Outcome != consume.Stored {
		t.Errorf("the child once its parent is stored: %+v; want stored", res[0])
	}
	if res := store(child(12, 99, mysqlsink.DefaultOrderingAttempts-1)); res[0].Outcome != consume.Retryable {
		t.Errorf("an orphan on delivery %d: %+v; want retryable", mysqlsink.DefaultOrderingAttempts-1, res[0])
	}
	res = store(child(12, 99, mysqlsink.DefaultOrderingAttempts))
	if res[0].Outcome != consume.Permanent || !strings.Contains(res[0].Reason, "parent") || !strings.Contains(res[0].Reason, "1452") {
		t.Errorf("an orphan on delivery %d: %+v; want poison with the missing parent (1452) as its reason", mysqlsink.DefaultOrderingAttempts, res[0])
	}
}

// A source whose deliveries come seconds apart (Kafka's retry backoff: 1
// s, then 2 s) reaches the third delivery long before a parent on another
// partition, behind its own backlog, is stored: counted in deliveries
// alone, healthy children were dead-lettered. A missing parent is also
// waited for OrderingWait since the message's first delivery
// (consume.Message.FirstReceivedAt), whatever the delivery.
func TestMissingParentIsWaitedForSinceTheFirstDelivery(t *testing.T) {
	db := userDB(t, "CREATE TABLE parents (id INT PRIMARY KEY) ENGINE=InnoDB",
		"CREATE TABLE children (id INT PRIMARY KEY, parent INT NOT NULL, FOREIGN KEY (parent) REFERENCES parents (id)) ENGINE=InnoDB")
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	s := prepare(t, db, mysqlsink.Config{Statement: "INSERT INTO children (id, parent) VALUES (:json.id, :json.parent)", Now: func() time.Time { return now }})
	orphan := func(id int, first time.Time) consume.Message {
		return consume.Message{ID: fmt.Sprintf("o-%d", id), Body: fmt.Appendf(nil, `{"id":%d,"parent":99}`, id),
			ReceiveCount: mysqlsink.DefaultOrderingAttempts + 2, FirstReceivedAt: first}
	}
	res, err := s.Store(context.Background(), []consume.Message{
		orphan(1, now.Add(-3*time.Second)),
		orphan(2, now.Add(-mysqlsink.DefaultOrderingWait-time.Second)),
		orphan(3, time.Time{}),
	})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Outcome != consume.Retryable || !res[0].Waiting {
		t.Errorf("an orphan on delivery %d, first delivered 3 s ago: %+v; want retryable, waiting", mysqlsink.DefaultOrderingAttempts+2, res[0])
	}
	if res[1].Outcome != consume.Permanent || !strings.Contains(res[1].Reason, "1452") {
		t.Errorf("an orphan first delivered %v ago: %+v; want poison with the missing parent as its reason", mysqlsink.DefaultOrderingWait+time.Second, res[1])
	}
	if res[2].Outcome != consume.Permanent {
		t.Errorf("an orphan on delivery %d, its first delivery unknown: %+v; want poison", mysqlsink.DefaultOrderingAttempts+2, res[2])
	}
}
