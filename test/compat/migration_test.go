package compat

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/strandlog/strand/test/grouptest"
	"github.com/strandlog/strand/test/javatest"
	"github.com/strandlog/strand/test/librdkafkatest"
)

// The migration playbook (test/grouptest.RunPlaybook) against the real
// binary: a producer writes keyed records to 10 partitions throughout;
// three v1 consumers in group orders-processor; a v2 canary joins (resumes
// its partitions from their committed offsets) and is killed (the rollback:
// its partitions go back after the broker's disconnect grace, long before
// the session timeout); then v2 consumers
// start one by one as the v1 ones stop. Every record must be processed,
// none skipped, and the duplicates stay within what was processed but not
// yet committed at the hand-offs, by the consumers' own logs (the broker's
// hand-off history is checked by the in-process variant in
// internal/server).
//
// franz-go → franz-go (cooperative-sticky throughout), and the Java client
// with its default assignors (range, cooperative-sticky: eager) → franz-go
// (cooperative-sticky): one group of mixed clients, whose protocol moves
// from range to cooperative-sticky when the first franz-go member joins.
//
// Across the protocols (KIP-848): Java v1 on the classic protocol and
// franz-go (or librdkafka) v2 on the consumer protocol (server-side
// assignor) in one group id: the group upgrades when the canary joins and is still a consumer
// group at the end. Then the reverse, a rollback: franz-go v1 on the
// consumer protocol and Java v2 on the classic one: the group stays a
// consumer group while both kinds are in it and is downgraded to classic
// once the last consumer-protocol member leaves.
//
// Each run reports the longest time a partition went without an owner
// while the canary joined and during the scale-over, and checks the
// broker's hand-off ledger, read from __strand_handoffs, against the
// consumers' logs (grouptest.CheckLedger): every hand-off with the
// committed offset, nothing skipped, and no more duplicates than the
// duplicate risk it reports.
func TestMigrationPlaybook(t *testing.T) {
	t.Parallel()
	kgoMigrant := func(t *testing.T, addr string) func(string) (grouptest.Member, error) {
		return func(name string) (grouptest.Member, error) {
			return kgoMember(t, addr, "orders", migrationGroup, name), nil
		}
	}
	javaMigrant := func(t *testing.T, addr string) func(string) (grouptest.Member, error) {
		javatest.Helper(t)
		return func(name string) (grouptest.Member, error) {
			return javaMember(t, addr, "orders", migrationGroup, name, "compat.assignor=default"), nil
		}
	}
	kgoConsumerMigrant := func(t *testing.T, addr string) func(string) (grouptest.Member, error) {
		return func(name string) (grouptest.Member, error) {
			return kgoMemberOf(t, grouptest.ConsumerConfig{Name: name, Addr: addr, Group: migrationGroup, Topic: "orders",
				SessionTimeout: consumerSession, ServerSide: true}), nil
		}
	}
	librdkafkaConsumerMigrant := func(t *testing.T, addr string) func(string) (grouptest.Member, error) {
		librdkafkatest.Python(t)
		return func(name string) (grouptest.Member, error) {
			return librdkafkatest.GroupMember(t, addr, "orders", migrationGroup, name, "consumer"), nil
		}
	}
	for _, c := range []struct {
		name   string
		v1, v2 func(*testing.T, string) func(string) (grouptest.Member, error)
		// The group's type (ListGroups) with the canary and at the end;
		// "" where the classic protocol alone is used.
		withCanary, atEnd string
	}{
		{"kgo-to-kgo", kgoMigrant, kgoMigrant, "classic", "classic"},
		{"java-to-kgo", javaMigrant, kgoMigrant, "classic", "classic"},
		{"java-classic-to-kgo-consumer", javaMigrant, kgoConsumerMigrant, "consumer", "consumer"},
		{"kgo-consumer-to-java-classic", kgoConsumerMigrant, javaMigrant, "consumer", "classic"},
		{"java-classic-to-librdkafka-consumer", javaMigrant, librdkafkaConsumerMigrant, "consumer", "consumer"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			b := startBroker(t, append(slices.Clone(groupBrokerArgs), consumerGroupBrokerArgs...)...)
			createTopic(t, b.Addr, "orders", groupPartitions, nil)
			res := grouptest.RunPlaybook(t, grouptest.PlaybookConfig{Addr: b.Addr, Topic: "orders", Group: migrationGroup,
				Partitions: groupPartitions, V1: c.v1(t, b.Addr), V2: c.v2(t, b.Addr), SessionTimeout: groupSession,
				RollbackWithin: rollbackWithin})
			if res.TypeWithCanary != c.withCanary || res.TypeAtEnd != c.atEnd {
				t.Errorf("the group was a %s group with the canary and a %s group at the end; want %s and %s",
					res.TypeWithCanary, res.TypeAtEnd, c.withCanary, c.atEnd)
			}
			t.Logf("%s: longest time a partition went unowned %v; rollback %v; %s", c.name,
				res.LongestUnowned.Round(time.Millisecond), res.Rollback.Round(time.Millisecond), res.Report.Summary())
			if !t.Failed() {
				grouptest.CheckLedger(t, context.Background(), b.Addr, res, migrationGroup, "orders", "v2-canary")
				// The operator's view of the same: nothing skipped, exit 0.
				if rep, r := migrateReport(t, b.Addr, migrationGroup); r.err != nil || rep.Totals.Skipped != 0 || rep.Totals.Handoffs == 0 {
					t.Errorf("migrate report of a clean migration: %d hand-offs, %d skipped: %v", rep.Totals.Handoffs, rep.Totals.Skipped, r)
				} else {
					t.Logf("migrate report: %d hand-offs, duplicate risk %d, longest unowned %v", rep.Totals.Handoffs,
						rep.Totals.DuplicateRisk, time.Duration(rep.Totals.LongestUnowned)*time.Millisecond)
				}
			}
		})
	}
}

const migrationGroup = "orders-processor"
