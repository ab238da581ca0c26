// Package consume is the consumer domain of Sluice: one batch is "read the
// allowed rate, pace, validate, store, acknowledge what was stored, release the
// rest, dead-letter the poison". It declares the small interfaces it needs
// (Source, DeadLetterer, Sink, RateReader, Clock) and holds the pacing code
// that the SQS Lambda, the ECS worker and the embedded demo all run. A
// Lease (over a PeerStore) shares the rate by the instances that actually
// run and reports what this instance stored, from which the controller reads
// the processed rate.
//
// Adapters live in pkg/adapter/... (sqsqueue, kafkasource, mysqlsink,
// httpsink, memqueue); each asserts at compile time the interface it serves.
package consume
