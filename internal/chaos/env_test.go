package chaos

import (
	"maps"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/bench/consumers"
)

// TestEveryScenarioToldTheQueueRetention: ElasticMQ does not report a
// queue's MessageRetentionPeriod, so every SQS scenario's consumers are
// told the retention the stack's queues are created with (the SQS
// Lambda's open-circuit visibility needs it), in one place, and no
// scenario tells another.
func TestEveryScenarioToldTheQueueRetention(t *testing.T) {
	st := &consumers.Stack{Loop: "l", Table: "t", QueueURL: "http://q", DLQURL: "http://dlq"}
	for _, size := range []Size{Short, Full} {
		for _, sc := range Scenarios(size) {
			env := consumerEnv(st, "http://dest")
			maps.Copy(env, sc.Env)
			got, err := time.ParseDuration(env["SLUICE_QUEUE_RETENTION"])
			if err != nil || got != consumers.DefaultQueueRetention {
				t.Errorf("%s on %s (scale %v): SLUICE_QUEUE_RETENTION %q; want %v", sc.Name, sc.Path, size.Scale,
					env["SLUICE_QUEUE_RETENTION"], consumers.DefaultQueueRetention)
			}
		}
	}
	if consumers.DefaultQueueRetention != 96*time.Hour {
		t.Errorf("the stacks' queues keep messages %v; want SQS's default, 4 days", consumers.DefaultQueueRetention)
	}
}
