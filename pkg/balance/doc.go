// Package balance spreads load over the nodes of a destination (the database
// replicas or HTTP servers that consumers write to) so that every node runs
// near the fleet's mean utilization, as Dropbox's Robinhood does.
//
// Its Controller is one PI controller per node (a proportional and an
// integral gain, no derivative) that moves the node's weight (its share of
// the traffic) so that the node's utilization approaches the fleet mean.
// Weights are normalized (they sum to 1), bounded, and plain data (Config
// and State) that round-trips through JSON exactly, so the controller Lambda
// can keep them in DynamoDB between invocations.
//
// The consumers follow the weights with pkg/wrr (smooth weighted
// round-robin), which does not import this package: a consumer links no
// controller. The simulated fleet and the experiment behind `sluice lab
// balance`, which compares plain round-robin and the PI weights, are the
// lab's (internal/balancelab), not this package's. The control math imports
// only the standard library.
package balance
