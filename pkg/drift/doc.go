// Package drift tells when a plant moved away from the model a loop
// predicts it with: it compares each new datapoint of the measured signal
// with what the model (a first-order-plus-dead-time Model) predicts from
// the rates the loop applied, keeps the last ChangeWindow pairs (those at
// the signal's ceiling as lower bounds), and reads the window with three
// tests. A load from outside shifts the residual by a constant whatever the
// rate; a plant whose gain moved makes the residual follow the rate; a
// plant whose dead time moved answers each step of the rate late or early.
//
//   - The slope test (drift.go) regresses the residual on the prediction,
//     with a level that may step once (a load starting or ending): the
//     slope is the relative gain error.
//   - The change test (change.go) asks whether a change of gain at some
//     instant explains the whole window better than a load.
//   - The dead-time test (dead.go) asks whether another dead time explains
//     the answer to the rate's steps better than the model's.
//
// Any of them sets State.ModelDrift, with its Reason, until the model
// changes. The change and dead-time tests are generalized likelihood ratio
// tests of a change at an unknown instant (M. Basseville and I. V.
// Nikiforov, Detection of Abrupt Changes: Theory and Application,
// Prentice Hall, 1993, ch. 2 and 7), the datapoints at the ceiling kept as
// censored rows (lower bounds) of the least-squares fits.
//
// Like pkg/control, it imports only the standard library, and the detector
// is plain data (Config and State) plus Update, so its State can be saved
// between Lambda invocations and restored exactly. The model's answer to
// the rates applied comes in as a Response: pkg/loop passes pkg/control's
// FOPDT.Expected on the controller's history.
package drift
