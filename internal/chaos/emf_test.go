package chaos

import (
	"fmt"
	"testing"
)

// TestEMFCounterSumsRequeues: the function's EMF lines, split across
// writes and after the emulator's prefix, are summed for the refused dead
// letters, the requeues and the last receives kept.
func TestEMFCounterSumsRequeues(t *testing.T) {
	e := &emfCounter{}
	for _, w := range []string{
		`START RequestId: 1` + "\n" + `{"DeadLetterRefused":1,"Requeued":2,"KeptLastReceive":0}` + "\n",
		`prefix {"DeadLetterRefused":0,"Requeued":1,`, `"KeptLastReceive":3}` + "\n",
		`{"msg":"batch"}` + "\n",
	} {
		fmt.Fprint(e, w)
	}
	if e.refused() != 1 || e.requeued() != 3 || e.kept() != 3 {
		t.Errorf("refused %d, requeued %d, kept %d; want 1, 3, 3", e.refused(), e.requeued(), e.kept())
	}
}
