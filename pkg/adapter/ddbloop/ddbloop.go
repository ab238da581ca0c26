// Package ddbloop is the controller's side of the loop table in DynamoDB:
// the operator's parameters (PARAMS), the verdict on their latest edit
// (PARAMS_STATUS) and the controller's state (STATE), read for every loop at
// once and committed with RATE in one conditional transaction per loop
// (loop.TickStore). The consumers' items (RATE, the leases) and the table
// client are pkg/adapter/ddbstore's, which a Store embeds.
// docs/controller.md documents every attribute.
package ddbloop

import "github.com/sluice-dev/sluice/pkg/adapter/ddbstore"

// Sort keys of the controller's items of one loop.
const (
	SortParams       = "PARAMS"
	SortParamsStatus = "PARAMS_STATUS"
	SortState        = "STATE"
)

// Store reads and writes every item of every loop in one table: the
// controller's here, the consumers' through the embedded ddbstore.Store.
type Store struct {
	*ddbstore.Store
	api    ddbstore.API
	table  string
	legacy legacyCounts
}

// New returns a store on table (ddbstore.DefaultTable when empty) through
// api.
func New(api ddbstore.API, table string) *Store {
	rs := ddbstore.New(api, table)
	return &Store{Store: rs, api: api, table: rs.Table()}
}
