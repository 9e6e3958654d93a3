// Package model holds the leaf types every other package shares: typed
// offsets, epochs and node ids, topic-partition names, a read-only view
// of a Kafka record batch header, and the coordinators' small record
// batches (encoding, record walk, Kafka's key-to-partition rule). It does no I/O and imports only the
// standard library, so any package may depend on it.
package model
