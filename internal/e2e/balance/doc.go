// Package balance holds the end-to-end test of load balancing: three local
// HTTP servers of different capacity, each reporting the utilization its
// request rate causes, requests spread by the smooth weighted round-robin
// picker, and the PI balancer reading the servers' utilization every tick and
// updating the picker's weights. The package has no code besides its tests.
package balance
