// Package console is the web console the admin listener serves: the
// cluster's brokers and health, topics with their sizes and rates, a
// record browser, consumer groups with their members, lag per partition
// and a chart of it over time, and each group's hand-off timeline from the
// ledger. Pages are rendered on the server from templates and a style
// sheet built into the binary, so it works offline and needs no build
// step. It reads the cluster through the Kafka protocol (internal/inspect),
// so it shows what the command-line tools show. It is read-only unless
// actions are enabled: then a group's offsets can be reset and the group
// deleted, each after a confirmation.
package console
