// Package control is the control law of Sluice: the PID family with output
// bounds, slew limit, anti-windup, setpoint filter, reference feedforward on
// a first-order-plus-dead-time model and a delay-aware integrator, and
// override control over several signals. Gains are in the ideal parallel
// form: Kp in (msg/s) per point, Ki in (msg/s) per point-second, Kd in msg
// per point ((msg/s)·s per point). It imports only the standard library; every controller is plain data (Config and State)
// plus Update, so its state can be saved between Lambda invocations and
// restored exactly.
//
// One tick of a loop fed by CloudWatch looks like this:
//
//	out := c.Update(control.Input{
//		Setpoint:          params.Setpoint,
//		Measurement:       dp.Value,                       // NaN when there is no datapoint
//		MeasurementAge:    now.Sub(dp.Timestamp.Add(period)), // since its period ended
//		MeasurementPeriod: period,
//		SamplingInterval:  now.Sub(lastTick),
//	})
//	if out.Held { c.Override(policy.Apply(out.Rate, staleFor, interval)) } // what was really sent
//
// The age and period let the controller integrate each datapoint once and,
// with Config.DelayAware, predict what the rate already sent will still do;
// Config.AdaptGain then re-identifies the plant's gain from the datapoints
// when it moved away from the model's (adapt.go).
//
// Tuning: gains come from an identified model (pkg/ident) through a rule
// (pkg/tuning), usually SIMC (S. Skogestad, "Simple analytic rules for model
// reduction and PID controller tuning", J. Process Control 13, 2003) on the
// loop model whose dead time includes the measurement pipeline's delay. The
// structure follows K. J. Astrom and R. M. Murray, Feedback Systems (2nd ed.,
// 2021), ch. 11, and K. J. Astrom and T. Hagglund, Advanced PID Control
// (ISA, 2006), ch. 3 and 7.
package control
