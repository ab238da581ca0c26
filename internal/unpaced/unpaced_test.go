package unpaced_test

import (
	"context"
	"testing"

	"github.com/sluice-dev/sluice/internal/unpaced"
)

func TestContext(t *testing.T) {
	ctx := context.Background()
	if unpaced.From(ctx) {
		t.Errorf("From(Background) = true; want false")
	}
	if !unpaced.From(unpaced.Context(ctx)) {
		t.Errorf("From(Context(ctx)) = false; want true")
	}
	child, cancel := context.WithCancel(unpaced.Context(ctx))
	defer cancel()
	if !unpaced.From(child) {
		t.Errorf("From(child of Context(ctx)) = false; want true")
	}
}
