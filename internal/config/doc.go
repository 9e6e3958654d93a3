// Package config defines the broker's settings (Broker, with Defaults and
// Validate) and the topic-level configs Kafka clients know by name
// (retention.ms, cleanup.policy, ...): their types, defaults, validation, and
// how a topic's overrides become a partition log's settings. Flags and config
// files are parsed in cmd/strand, never here.
package config
