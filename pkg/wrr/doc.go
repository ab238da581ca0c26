// Package wrr is the consumers' side of the balancer: nginx's smooth
// weighted round-robin (Picker), which turns the per-node weights that the
// controller writes to RATE (protocol.Rate.Weights, computed by pkg/balance)
// into a deterministic, evenly interleaved sequence of nodes for the HTTP
// sink, and Spread and Follow, which set a picker's weights from RATE at
// every rate read. It imports only the standard library, so that a consumer
// links no controller.
package wrr
