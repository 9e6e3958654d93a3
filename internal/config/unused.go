package config

import (
	_ "embed"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// KafkaDef is one of Apache Kafka's broker configs as its DescribeConfigs
// gives it: its type, whether it changes at run time, whether its value is
// a secret, and its default (none when Default is nil).
type KafkaDef struct {
	Name      string
	Type      Type
	ReadOnly  bool
	Sensitive bool
	Default   *string
}

// kafkaBrokerConfigs is every broker config of the Kafka release Strand
// answers as, written from that release's DescribeConfigs by test/compat
// (STRAND_WRITE_KAFKA_CONFIGS=1), which also checks it against the release.
//
//go:embed kafka_broker_configs.tsv
var kafkaBrokerConfigs string

// KafkaDefs are Kafka's broker configs, sorted by name.
var KafkaDefs = parseKafkaDefs(kafkaBrokerConfigs)

func parseKafkaDefs(tsv string) []KafkaDef {
	var defs []KafkaDef
	for i, line := range strings.Split(tsv, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) != 5 {
			panic(fmt.Sprintf("config: kafka_broker_configs.tsv:%d: %d fields", i+1, len(f)))
		}
		typ, err := strconv.Atoi(f[1])
		if err != nil {
			panic(fmt.Sprintf("config: kafka_broker_configs.tsv:%d: type %q", i+1, f[1]))
		}
		d := KafkaDef{Name: f[0], Type: Type(typ), ReadOnly: f[2] == "read-only", Sensitive: f[3] == "sensitive"}
		if f[4] != "null" {
			v, err := strconv.Unquote(f[4])
			if err != nil {
				panic(fmt.Sprintf("config: kafka_broker_configs.tsv:%d: default %s", i+1, f[4]))
			}
			d.Default = &v
		}
		defs = append(defs, d)
	}
	slices.SortFunc(defs, func(a, b KafkaDef) int { return strings.Compare(a.Name, b.Name) })
	return defs
}

// KafkaDefsTSV writes defs, Kafka's configs of a resource (broker,
// group), as kafka_broker_configs.tsv has them, under a header naming the
// release they come from.
func KafkaDefsTSV(resource, release string, defs []KafkaDef) string {
	defs = slices.SortedFunc(slices.Values(defs), func(a, b KafkaDef) int { return strings.Compare(a.Name, b.Name) })
	var b strings.Builder
	fmt.Fprintf(&b, "# The %s configs of Apache Kafka %s, as its DescribeConfigs gives them:\n", resource, release)
	b.WriteString("# name, type (DescribeConfigs' number), read-only or dynamic, sensitive or not, default (quoted; null for none).\n")
	b.WriteString("# Written by STRAND_WRITE_KAFKA_CONFIGS=1 go test -run TestCLIAgainstKafka/broker-configs ./test/compat.\n")
	for _, d := range defs {
		ro, sens, def := "dynamic", "-", "null"
		if d.ReadOnly {
			ro = "read-only"
		}
		if d.Sensitive {
			sens = "sensitive"
		}
		if d.Default != nil {
			def = strconv.Quote(*d.Default)
		}
		fmt.Fprintf(&b, "%s\t%d\t%s\t%s\t%s\n", d.Name, d.Type, ro, sens, def)
	}
	return b.String()
}

// LookupKafkaDef finds one of Kafka's broker configs.
func LookupKafkaDef(name string) (*KafkaDef, bool) {
	i, ok := slices.BinarySearchFunc(KafkaDefs, name, func(d KafkaDef, n string) int { return strings.Compare(d.Name, n) })
	if !ok {
		return nil, false
	}
	return &KafkaDefs[i], true
}

// UnusedKafkaDef is a broker config of Apache Kafka's that Strand does not
// act on: a config file may set it, as a Kafka server.properties does
// (strand serve warns and goes on), DescribeConfigs describes it with
// Kafka's default, and AlterConfigs keeps a value for it where Kafka lets
// it change at run time.
type UnusedKafkaDef struct {
	KafkaDef
	Why string // why Strand does without it
}

// unusedWhy says why Strand does without some of Kafka's configs; the
// others get unusedElse.
var unusedWhy = map[string]string{
	"process.roles":                         "every node is a broker, and a voter of the metadata quorum when controller.quorum.voters names it",
	"controller.quorum.bootstrap.servers":   "the metadata quorum is the nodes of controller.quorum.voters",
	"controller.quorum.election.timeout.ms": "the metadata quorum's Raft has its own timing",
	"controller.quorum.fetch.timeout.ms":    "the metadata quorum's Raft has its own timing",
	"metadata.log.dir":                      "the cluster metadata is kept under log.dirs",
	"num.network.threads":                   "each connection is served by its own goroutines",
	"num.io.threads":                        "requests are served by the connections' goroutines",
	"background.threads":                    "background work runs in goroutines as it is needed",
	"num.recovery.threads.per.data.dir":     "the log manager opens and closes logs with its own pool",
	"num.replica.fetchers":                  "a follower runs one fetcher per leader it follows",
	"socket.receive.buffer.bytes":           "connections keep the system's receive buffer",
	"socket.listen.backlog.size":            "listeners take the system's backlog",
	"log.cleaner.threads":                   "compacted logs are cleaned by the log manager's background loop",
	"log.cleaner.backoff.ms":                "the log manager's background loop looks for logs to clean",
	"log.flush.scheduler.interval.ms":       "writes reach the disk as --fsync says",
	"delete.topic.enable":                   "topics can always be deleted (Kafka's default)",
	"transaction.state.log.min.isr":         "__transaction_state takes the broker's min.insync.replicas",
	"offsets.topic.segment.bytes":           "__consumer_offsets has Kafka's default 100 MiB segments",
	"transaction.state.log.segment.bytes":   "__transaction_state has Kafka's default 100 MiB segments",
	"log.retention.hours":                   "a config file's value is read into log.retention.ms, which is in force",
	"log.retention.minutes":                 "a config file's value is read into log.retention.ms, which is in force",
	"log.roll.hours":                        "a config file's value is read into log.roll.ms, which is in force",
	"security.inter.broker.protocol":        "a config file's value is read into inter.broker.listener.name",
}

const unusedElse = "Strand does not act on it"

// UnusedKafkaDefs are Kafka's broker configs that Strand does not serve
// under their names, sorted by name: KafkaDefs but BrokerDefs. A Kafka
// broker config Strand comes to serve joins BrokerDefs and leaves this
// list by itself.
var UnusedKafkaDefs = unusedKafkaDefs()

func unusedKafkaDefs() []UnusedKafkaDef {
	var out []UnusedKafkaDef
	for _, d := range KafkaDefs {
		if _, served := LookupBrokerDef(d.Name); served {
			continue
		}
		why, ok := unusedWhy[d.Name]
		if !ok {
			if strings.HasPrefix(d.Name, "share.") || strings.HasPrefix(d.Name, "group.share.") {
				why = "share groups are not served yet"
			} else {
				why = unusedElse
			}
		}
		out = append(out, UnusedKafkaDef{KafkaDef: d, Why: why})
	}
	return out
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
		for _, a := range d.Aliases {
			keys = append(keys, a.Key)
		}
	}
	for _, d := range UnusedKafkaDefs {
		keys = append(keys, d.Name)
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}
