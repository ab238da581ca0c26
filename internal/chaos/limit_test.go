package chaos

import (
	"testing"
	"time"
)

// TestFullScenariosOutlastTheirFaults: at full size a scenario's time limit
// leaves at least 10 minutes past its long fault (the 30-minute pause, the
// 15-minute outage, the 10-minute brownout) for the messages before and
// after it; a limit inside the fault fails the run whatever the consumers
// do.
func TestFullScenariosOutlastTheirFaults(t *testing.T) {
	faults := map[string]time.Duration{"rate-zero-30m": 30 * time.Minute, "mysql-down-15m": 15 * time.Minute, "brownout-90": 10 * time.Minute}
	const margin = 10 * time.Minute
	for _, sc := range Scenarios(Full) {
		if d, ok := faults[sc.Name]; ok && sc.limit() < d+margin {
			t.Errorf("%s on %s: limit %v; want at least %v (the fault) + %v", sc.Name, sc.Path, sc.limit(), d, margin)
		}
	}
	for _, sc := range KafkaScenarios(Full) {
		if d, ok := faults[sc.Name]; ok && sc.limit() < d+margin {
			t.Errorf("%s on Kafka: limit %v; want at least %v (the fault) + %v", sc.Name, sc.limit(), d, margin)
		}
	}
}
