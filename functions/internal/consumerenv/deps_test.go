package consumerenv_test

import (
	"os/exec"
	"strings"
	"testing"
)

// The consumer functions link the contract (pkg/protocol) and never the
// controller: the tick, its PARAMS decoding, the control law, the balancer's
// controller or the controller's store items. A consumer binary then stays
// small, and a change to the controller cannot change what a consumer runs.
func TestConsumersLinkNoController(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go is not on PATH: cannot list the consumers' dependencies")
	}
	const mod = "github.com/sluice-dev/sluice/"
	consumers := []string{"functions/sqs-consumer", "functions/kafka-consumer", "functions/worker"}
	forbidden := []string{"pkg/loop", "pkg/control", "pkg/balance", "pkg/drift", "pkg/metric", "pkg/adapter/ddbloop"}
	for _, c := range consumers {
		out, err := exec.Command(goTool, "list", "-deps", mod+c).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", c, err)
		}
		for _, dep := range strings.Fields(string(out)) {
			for _, f := range forbidden {
				if dep == mod+f || strings.HasPrefix(dep, mod+f+"/") {
					t.Errorf("%s links %s; a consumer must link only pkg/protocol of the controller's side", c, dep)
				}
			}
		}
	}
}
