package compat

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandlog/strand/test/grouptest"
	"github.com/strandlog/strand/test/javatest"
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
	javatest.Helper(t) // build (or skip) before starting a broker
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
			if c.static {
				// The restart of a JVM must fit in the session, on a
				// loaded machine too.
				session = 15 * time.Second
			}
			runGroupOfThree(t, b, groupScenario{group: group, topic: "orders", session: session, static: c.static,
				start: func(name string) grouptest.Member {
					props := []string{"compat.assignor=" + c.assignor}
					if c.static {
						props = append(props, "group.instance.id=instance-"+name,
							fmt.Sprintf("session.timeout.ms=%d", session.Milliseconds()))
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

// TestGroupMemberFlap: a member whose connections all drop and come back
// within the broker's disconnect grace keeps its place and its partitions,
// under both protocols, and no member sees a rebalance (the kill in
// runGroupOfThree is the other side: one that stays away is removed after
// the grace).
func TestGroupMemberFlap(t *testing.T) {
	t.Parallel()
	for _, serverSide := range []bool{false, true} {
		name := map[bool]string{false: "classic", true: "consumer"}[serverSide]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := startBroker(t, append(slices.Clone(groupBrokerArgs), consumerGroupBrokerArgs...)...)
			group := "flap-" + name
			createTopic(t, b.Addr, "orders", groupPartitions, nil)
			ctx := groupCtx(t, 2*time.Minute)
			adm := grouptest.Admin(t, b.Addr)
			var cs []*grouptest.Consumer
			var ms []grouptest.Member
			for i := range 3 {
				m := kgoMemberOf(t, grouptest.ConsumerConfig{Name: fmt.Sprintf("%s-%d", group, i), Addr: b.Addr,
					Group: group, Topic: "orders", SessionTimeout: groupSession, ServerSide: serverSide})
				cs, ms = append(cs, m.(*grouptest.Consumer)), append(ms, m)
			}
			grouptest.WaitSettled(t, ctx, adm, group, "orders", groupPartitions, ms...)
			before := make([]int, len(cs))
			for i, c := range cs {
				before[i] = len(c.Log().Events)
			}
			owned := cs[1].Log().Owned()

			// Three blips of member 1's connections, a second apart: each
			// time it reconnects within the grace.
			for range 3 {
				cs[1].Flap()
				time.Sleep(time.Second)
			}
			time.Sleep(3 * time.Second) // past the last grace
			if why := grouptest.Settled(ctx, adm, group, "orders", groupPartitions, ms); why != "" {
				t.Fatalf("after the flaps: %s", why)
			}
			if got := cs[1].Log().Owned(); !slices.Equal(got, owned) {
				t.Errorf("the flapping member owns %v, had %v", got, owned)
			}
			for i, c := range cs {
				for _, e := range c.Log().Events[before[i]:] {
					if e.Kind == grouptest.Assigned || e.Kind == grouptest.Revoked || e.Kind == grouptest.Lost {
						t.Errorf("%s saw a rebalance while member 1 flapped: %s %v", c.Name(), e.Kind, e.Partitions)
					}
				}
			}
		})
	}
}
