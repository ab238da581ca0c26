// Package ddbitem is the attribute codec of the loop table that
// pkg/adapter/ddbstore (the consumers' items: RATE, the leases) and
// pkg/adapter/ddbloop (the controller's items: PARAMS, STATE,
// PARAMS_STATUS) share: how numbers, times and JSON are kept in attributes,
// the RATE and PEER items, and the paginated query on the by-sk index.
//
// The items are decoded by hand rather than with attributevalue because a
// required attribute that is missing must be refused with its name, and
// optional ones have defaults other than zero.
package ddbitem

// Sort keys and the index of the table that both sides read.
const (
	// SortRate is the sort key of a loop's RATE item.
	SortRate = "RATE"
	// SortPeer is the sort key of the consumers' leases.
	SortPeer = "PEER"
	// IndexBySort is the global secondary index (partition key sk, sort
	// key pk) that lists every item of one kind in one query.
	IndexBySort = "by-sk"
)
