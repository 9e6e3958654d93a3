// Package logging gives each component of the broker (the "component"
// attribute its logger carries: protocol, group, replica, ...) a log
// level of its own that can change while the broker runs, as Kafka's
// BROKER_LOGGER config resource changes a logger's level: kafka-configs.sh
// --entity-type broker-loggers. A component without a level of its own
// logs at the root level (--log-level).
package logging
