// Package ident identifies a first-order-plus-dead-time (FOPDT) model of a
// plant from an open-loop step test: a record of sample times, the input (the
// consumption rate, messages/s) and the output (the destination's CPU,
// percent).
//
// The fit is a least-squares one. The model's response to the recorded input
// is simulated exactly (zero-order hold on the input, continuous-time lag and
// delay), the two linear parameters (base load and gain) are solved in closed
// form for every candidate time constant and dead time (variable projection,
// Golub & Pereyra 1973), and the two nonlinear ones are found by a coarse grid
// followed by a Nelder-Mead simplex search. The starting guess and the grid's
// centre come from Smith's two-point method (C. L. Smith, Digital Computer
// Process Control, 1972): with t28 and t63 the times at which the response
// reaches 28.3 % and 63.2 % of its final change, tau = 1.5 (t63 - t28) and
// theta = t63 - tau.
//
// Once a loop runs on an identified model, pkg/drift tells from its
// datapoints when the plant moved away from it (its gain or its dead time).
package ident
