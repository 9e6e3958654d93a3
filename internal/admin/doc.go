// Package admin serves the broker's admin HTTP listener: a JSON API of the
// groups this broker coordinates (members with their client software,
// partitions with their lag in offsets and in seconds), of the hand-off
// ledger and of the broker's health, and /metrics for Prometheus.
//
// It reads the broker through the small interfaces of source.go, which
// the server implements; it changes nothing. It is the only package that
// imports the Prometheus client library: the request path reports through
// Metrics, whose methods resolve their series once per label value and
// then only add to atomics.
//
// Groups live on their coordinator, so each broker reports the groups it
// coordinates; a group's figures (lag, hand-offs) are exported by one
// broker only, and scraping every broker sums to the cluster.
package admin
