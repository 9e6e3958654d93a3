// Package reader reads the hand-off ledger (internal/ledger) back with a
// Kafka client (franz-go), as the CLI and the tests do; any Kafka client
// could, the ledger being an ordinary topic of JSON records.
package reader
