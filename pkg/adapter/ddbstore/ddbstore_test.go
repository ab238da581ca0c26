package ddbstore_test

import (
	"testing"

	"github.com/sluice-dev/sluice/internal/testenv"
	"github.com/sluice-dev/sluice/pkg/adapter/ddbstore"
	"github.com/sluice-dev/sluice/pkg/adapter/ddbstore/ddbtest"
	"github.com/sluice-dev/sluice/pkg/loop/storetest"
)

// newStore returns a store on a fresh table in the local AWS endpoint.
func newStore(t *testing.T) *ddbstore.Store {
	t.Helper()
	testenv.AWSEndpoint(t)
	return ddbstore.New(ddbtest.Table(t, "sluice-test"))
}

func TestRateContract(t *testing.T) {
	storetest.TestRate(t, func(t *testing.T) storetest.RateStore { return newStore(t) })
}
