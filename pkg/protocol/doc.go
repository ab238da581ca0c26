// Package protocol is the contract between the controller and the consumers
// of a loop: the items both sides read and write in the store, and nothing
// of how either side computes them.
//
//   - Rate is the RATE item: the allowed rate the controller writes at every
//     tick and every consumer reads before each batch.
//   - Peer is a consumer instance's lease and report: the running counts
//     of what it stored and of its batches, which the controller turns into
//     the processed rate and the batch time.
//   - The live count (LiveBucket, BucketOf, LiveCount) is how many
//     instances share RATE, per time bucket, in the lease layout of
//     version 2 (Rate.LeaseLayout).
//   - ErrNotFound is what a store returns for an item that does not exist.
//
// docs/protocol.md specifies the items in DynamoDB, for consumers in any
// language.
//
// The consumers (pkg/consume, the consumer functions) import this package
// and not the controller's (pkg/loop), so that a consumer binary links no
// control law. The JSON names of the fields are part of the contract: a
// consumer and a controller of different releases read each other's items,
// so a field is only ever added, never renamed or given a new meaning.
// Adding a field bumps Version.
package protocol

// Version is the version of the items this package describes, written in
// RATE's attribute v. A controller or consumer that reads an item of a
// later version reads the fields it knows and ignores the others; a
// consumer keeps to the lease layout both sides know (Rate.LeaseLayout).
// docs/protocol.md specifies every item for consumers in any language.
//
// Version 2 added the per-loop lease layout (LatestLayout): the leases
// under the loop's own partition and the live counts per time bucket
// (LiveBucket), RATE's v and legacy_live.
const Version = 2

// LatestLayout is the newest lease layout: 1 is one item per instance that
// every consumer counts by a query; 2 (from Version 2) is one item per
// instance under the loop's partition plus a live count per LiveBucket.
const LatestLayout = 2
