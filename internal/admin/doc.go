// Package admin serves the broker's admin HTTP listener: a JSON API of the
// cluster's groups (members with their client software, partitions with
// their lag in offsets and in seconds), of the hand-off ledger and of the
// broker's view of the cluster's health, and /metrics for Prometheus.
//
// It reads the broker through the small interfaces of source.go, which
// the server implements; it changes nothing. It is the only package that
// imports the Prometheus client library: the request path reports through
// Metrics, whose methods resolve their series once per label value and
// then only add to atomics.
//
// Groups live on their coordinator. The JSON API answers for every group
// of the cluster from any broker: a group this broker coordinates from
// the coordinator itself, any other as its coordinator answers the Kafka
// protocol (ClusterGroups: ListGroups, DescribeGroups or
// ConsumerGroupDescribe, OffsetFetch, as the console and `strand group`
// read them). Lag is worked out here alike for both, from the partitions'
// leaders. Two figures the protocol does not carry come from elsewhere for
// a group coordinated on another broker: the members' client software
// from the hand-off ledger (once a member's first hand-off is recorded),
// and a classic group's generation not at all (-1).
//
// /metrics does not do the same: each broker exports the groups it
// coordinates (their members, lag and events), and the help of each group
// metric says so. Were every broker to export every group, a Prometheus
// that scrapes every broker, as it must for the brokers' own metrics,
// would count each group once per broker, and each scrape would ask the
// other coordinators. Scraping every broker sums to the cluster, as with
// Kafka's exporters.
package admin
