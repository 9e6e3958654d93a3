package compat

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandlog/strand/test/grouptest"
)

// The group-of-three scenario (runGroupOfThree) with each real client
// against the real binary: franz-go (range and cooperative-sticky), the
// Java client (eager range, CooperativeStickyAssignor, static membership),
// librdkafka through kcat -G, and kafka-python's KafkaConsumer.

func TestGroupKgo(t *testing.T) {
	t.Parallel()
	for _, bal := range []kgo.GroupBalancer{kgo.RangeBalancer(), kgo.CooperativeStickyBalancer()} {
		t.Run(bal.ProtocolName(), func(t *testing.T) {
			t.Parallel()
			b := startBroker(t, groupBrokerArgs...)
			group := "kgo-" + bal.ProtocolName()
			runGroupOfThree(t, b, groupScenario{group: group, topic: "orders", session: groupSession,
				start: func(name string) grouptest.Member {
					return kgoMember(t, b.Addr, "orders", group, name, bal)
				}})
		})
	}
}

func TestGroupJava(t *testing.T) {
	t.Parallel()
	javaHelper(t) // build (or skip) before starting a broker
	for _, c := range []struct {
		name     string
		assignor string
		static   bool
	}{
		{"range", "range", false},
		{"cooperative-sticky", "cooperative-sticky", false},
		{"static-range", "range", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := startBroker(t, groupBrokerArgs...)
			group := "java-" + c.name
			session := groupSession
			runGroupOfThree(t, b, groupScenario{group: group, topic: "orders", session: session, static: c.static,
				start: func(name string) grouptest.Member {
					props := []string{"compat.assignor=" + c.assignor}
					if c.static {
						props = append(props, "group.instance.id=instance-"+name)
					}
					return javaMember(t, b.Addr, "orders", group, name, props...)
				}})
		})
	}
}

func TestGroupKcat(t *testing.T) {
	t.Parallel()
	kcat := needKcat(t)
	b := startBroker(t, groupBrokerArgs...)
	runGroupOfThree(t, b, groupScenario{group: "kcat", topic: "orders", session: groupSession,
		start: func(name string) grouptest.Member {
			return kcatMember(t, kcat, b.Addr, "orders", "kcat", name)
		}})
}

func TestGroupKafkaPython(t *testing.T) {
	t.Parallel()
	needKafkaPython(t)
	b := startBroker(t, groupBrokerArgs...)
	runGroupOfThree(t, b, groupScenario{group: "python", topic: "orders", session: groupSession,
		produce: []kgo.Opt{kgo.ProducerBatchCompression(kgo.GzipCompression())},
		start: func(name string) grouptest.Member {
			return pythonMember(t, b.Addr, "orders", "python", name)
		}})
}
