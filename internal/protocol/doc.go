// Package protocol turns Kafka requests into calls on the packages that own
// the state, one file per API key (00_produce.go, 01_fetch.go, ...): decode
// (done by the server with kmsg) → check version and input → call replica,
// cluster, group or txn → encode the answer as a kmsg response. Each handler
// file opens with the versions it serves and what it does not support, and
// registers its range in one table that ApiVersions is built from. Handlers
// keep no state of their own. errors.go maps package errors to Kafka codes.
//
// A handler sees a partition as Partition (registry.go): it reads, appends
// and asks about offsets, epochs and throttles through it, and never
// reaches the partition's log; that arithmetic is the replica package's.
//
// The group requests of a group a cluster link passes through go to the
// link instead of the group coordinator (passthrough.go, Broker.Links):
// the link's source answers them, and the handler sends its answer on.
package protocol
