// Package config defines the broker's settings (Broker, with Defaults and
// Validate) and the topic-level configs Kafka clients know by name
// (retention.ms, cleanup.policy, ...): their types, defaults, validation, and
// how a topic's overrides become a partition's settings (replica.Config: the
// log's storage settings and the replication ones). Flags and config
// files are parsed in cmd/strand, never here.
//
// brokerdefs.go names the broker's settings as Kafka's broker configs
// (node.id, num.partitions, log.retention.ms, ...) for DescribeConfigs. The
// broker-level defaults of topic configs can be changed at runtime: the
// dynamic configs, kept in the cluster metadata, cluster-wide and per broker,
// are applied over the static settings by ApplyDynamic, and the levels a
// config is set at are listed by TopicSynonyms and BrokerSynonyms, the one in
// force first.
//
// unused.go lists the broker configs of Kafka's that Strand accepts in a
// config file but does not act on (num.io.threads, process.roles, ...),
// each with why, so that Kafka's own server.properties starts a broker.
// Every Kafka broker config is either in BrokerDefs or there: a config
// Strand comes to serve moves from one list to the other, and a key in
// neither is no Kafka config. Errors about a value name the config as it
// was given (ValueError), in the words Kafka's answers use.
package config
