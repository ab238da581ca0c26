package memstore_test

import (
	"testing"

	"github.com/sluice-dev/sluice/pkg/adapter/memstore"
	"github.com/sluice-dev/sluice/pkg/loop/storetest"
)

func TestRateContract(t *testing.T) {
	storetest.TestRate(t, func(*testing.T) storetest.RateStore { return memstore.New() })
}

func TestTickStoreContract(t *testing.T) {
	storetest.TestTickStore(t, func(*testing.T) storetest.Store { return memstore.New() })
}

func TestPeersContract(t *testing.T) {
	storetest.TestPeers(t, func(*testing.T) storetest.PeerStore { return memstore.New() })
}
