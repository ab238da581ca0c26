// Package balance holds the end-to-end tests of load balancing over three
// local HTTP servers of different capacity, each reporting the utilization
// its request rate causes. TestBalancerEvensOutThreeHTTPServers drives the
// smooth weighted round-robin picker with the PI balancer directly;
// TestProductBalancesThreeHTTPServers runs the product path: a PARAMS item
// listing the nodes, the controller tick (loop.Ticker) writing RATE with
// weights, and a consume.Consumer whose HTTP sink's picker follows them. The
// package has no code besides its tests.
package balance
