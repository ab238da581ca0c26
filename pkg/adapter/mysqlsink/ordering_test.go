package mysqlsink_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

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
	if res[0].Outcome != consume.Stored || res[1].Outcome != consume.Retryable || !strings.Contains(res[1].Reason, "parent") {
		t.Fatalf("a child with its parent and one before it, first delivery: %+v; want stored and retryable (parent missing)", res)
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
