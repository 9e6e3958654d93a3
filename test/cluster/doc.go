// Package cluster holds the end-to-end tests of Strand as a cluster:
// several brokers sharing a metadata quorum, in-process (testutil.StartCluster)
// and as real processes, driven by real clients.
package cluster
