// Package control is the control law of Sluice: the PID family with output
// bounds, slew limit, anti-windup, setpoint filter and reference feedforward,
// and a Smith predictor on a first-order-plus-dead-time model. It imports only
// the standard library; every controller is plain data (Config and State)
// plus Update, so its state can be saved between Lambda invocations and
// restored exactly.
package control
