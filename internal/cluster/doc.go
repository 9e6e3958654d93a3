// Package cluster holds the cluster's metadata: its id, the brokers, the
// topics with their ids, partition counts and config overrides, and the
// dynamic broker configs. On a single node it is one JSON file replaced
// atomically on every change; a cluster will keep the same state in a Raft
// log (cluster/raft, the only importer of the Raft library).
//
// Locking: Store.mu guards all state; methods copy what they return, so
// callers never share mutable state with the store.
package cluster
