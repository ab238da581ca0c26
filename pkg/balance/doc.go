// Package balance spreads load over the nodes of a destination (the database
// replicas or HTTP servers that consumers write to) so that every node runs
// near the fleet's mean utilization, as Dropbox's Robinhood does.
//
// It has two parts:
//
//   - Controller: one PI controller per node (a proportional and an integral
//     gain, no derivative) moves the node's weight (its share of the
//     traffic) so that the node's utilization approaches the fleet mean.
//     Weights are normalized (they sum to 1), bounded, and plain data
//     (Config and State) that round-trips through JSON exactly, so the
//     controller Lambda can keep them in DynamoDB between invocations.
//   - Picker: nginx's smooth weighted round-robin, which turns the weights into
//     a deterministic, evenly interleaved sequence of nodes for the HTTP sink;
//     Spread and Follow give it the weights of a list of nodes.
//
// The simulated fleet and the experiment behind `sluice lab balance`, which
// compares plain round-robin and the PI weights, are the lab's
// (internal/balancelab), not this package's. The control math imports only
// the standard library.
package balance
