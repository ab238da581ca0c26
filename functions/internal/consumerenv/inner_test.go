package consumerenv_test

import (
	"testing"

	"github.com/sluice-dev/sluice/functions/internal/consumerenv"
	"github.com/sluice-dev/sluice/functions/internal/functest"
)

// The Lambda consumers' consumer runs the inner loop by the settings RATE
// carries.
func TestConsumerInnerLoopFollowsRate(t *testing.T) {
	functest.WantInnerLoopFollowsRate(t, consumerenv.ConsumerConfig())
}
