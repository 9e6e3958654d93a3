package config

import (
	"slices"
	"strings"
)

// UnusedKafkaDef is a broker config of Apache Kafka's that Strand has no
// use for: a config file may set it, as a Kafka server.properties does,
// and strand serve accepts it with a warning instead of refusing to start.
type UnusedKafkaDef struct {
	Name string
	Why  string // why Strand does without it
}

// UnusedKafkaDefs are Kafka's broker configs that Strand accepts and does
// not act on, sorted by name. A Kafka broker config Strand comes to
// serve moves from here to BrokerDefs; one neither lists is no Kafka
// config, and a config file that sets it is refused.
var UnusedKafkaDefs = sortedUnused([]UnusedKafkaDef{
	{"process.roles", "every node is a broker, and a voter of the metadata quorum when controller.quorum.voters names it"},
	{"controller.quorum.bootstrap.servers", "the metadata quorum is the nodes of controller.quorum.voters"},
	{"controller.quorum.election.timeout.ms", "the metadata quorum's Raft has its own timing"},
	{"controller.quorum.fetch.timeout.ms", "the metadata quorum's Raft has its own timing"},
	{"metadata.log.dir", "the cluster metadata is kept under log.dirs"},
	{"num.network.threads", "each connection is served by its own goroutines"},
	{"num.io.threads", "requests are served by the connections' goroutines"},
	{"background.threads", "background work runs in goroutines as it is needed"},
	{"num.recovery.threads.per.data.dir", "the log manager opens and closes logs with its own pool"},
	{"num.replica.fetchers", "a follower runs one fetcher per leader it follows"},
	{"socket.receive.buffer.bytes", "connections keep the system's receive buffer"},
	{"socket.listen.backlog.size", "listeners take the system's backlog"},
	{"log.cleaner.threads", "compacted logs are cleaned by the log manager's background loop"},
	{"log.flush.scheduler.interval.ms", "writes reach the disk as --fsync says"},
	{"delete.topic.enable", "topics can always be deleted (Kafka's default)"},
	{"transaction.state.log.min.isr", "__transaction_state takes the broker's min.insync.replicas"},
	{"offsets.topic.segment.bytes", "__consumer_offsets has Kafka's default 100 MiB segments"},
	{"transaction.state.log.segment.bytes", "__transaction_state has Kafka's default 100 MiB segments"},
	{"share.coordinator.state.topic.replication.factor", "share groups are not served yet"},
	{"share.coordinator.state.topic.min.isr", "share groups are not served yet"},
})

func sortedUnused(defs []UnusedKafkaDef) []UnusedKafkaDef {
	slices.SortFunc(defs, func(a, b UnusedKafkaDef) int { return strings.Compare(a.Name, b.Name) })
	return defs
}

// LookupUnusedKafkaDef finds a Kafka broker config Strand does not act on.
func LookupUnusedKafkaDef(name string) (*UnusedKafkaDef, bool) {
	i, ok := slices.BinarySearchFunc(UnusedKafkaDefs, name, func(d UnusedKafkaDef, n string) int { return strings.Compare(d.Name, n) })
	if !ok {
		return nil, false
	}
	return &UnusedKafkaDefs[i], true
}

// FileKeys are the keys a config file may give under Kafka's names: the
// broker configs, the other names Kafka's server.properties uses for
// them, and the Kafka configs Strand does not act on. A file's unknown key
// is compared with these for a suggestion.
func FileKeys() []string {
	var keys []string
	for _, d := range BrokerDefs {
		keys = append(keys, d.Name)
	}
	for k := range kafkaFileKeys {
		keys = append(keys, k)
	}
	for _, d := range UnusedKafkaDefs {
		keys = append(keys, d.Name)
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}
