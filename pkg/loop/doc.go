// Package loop is the domain of one control loop (one queue-to-destination
// pair): the operator's parameters (PARAMS), the controller's saved state
// (STATE), the allowed rate that consumers read (RATE), and one controller
// tick that reads a metric, updates the controller and writes state and rate.
// It declares the small interfaces it needs; adapters in pkg/adapter/...
// implement them.
package loop
