package compat

import (
	"testing"

	"github.com/strandlog/strand/test/grouptest"
)

// The migration playbook (test/grouptest.RunPlaybook) against the real
// binary: a producer writes keyed records to 10 partitions throughout;
// three v1 consumers in group orders-processor; a v2 canary joins (resumes
// its partitions from their committed offsets) and is killed (the rollback:
// its partitions go back within the session timeout); then v2 consumers
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
func TestMigrationPlaybook(t *testing.T) {
	t.Parallel()
	kgoMigrant := func(t *testing.T, addr string) func(string) (grouptest.Member, error) {
		return func(name string) (grouptest.Member, error) {
			return kgoMember(t, addr, "orders", migrationGroup, name), nil
		}
	}
	javaMigrant := func(t *testing.T, addr string) func(string) (grouptest.Member, error) {
		javaHelper(t)
		return func(name string) (grouptest.Member, error) {
			return javaMember(t, addr, "orders", migrationGroup, name, "compat.assignor=default"), nil
		}
	}
	for _, c := range []struct {
		name   string
		v1, v2 func(*testing.T, string) func(string) (grouptest.Member, error)
	}{
		{"kgo-to-kgo", kgoMigrant, kgoMigrant},
		{"java-to-kgo", javaMigrant, kgoMigrant},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			b := startBroker(t, groupBrokerArgs...)
			createTopic(t, b.Addr, "orders", groupPartitions, nil)
			grouptest.RunPlaybook(t, grouptest.PlaybookConfig{Addr: b.Addr, Topic: "orders", Group: migrationGroup,
				Partitions: groupPartitions, V1: c.v1(t, b.Addr), V2: c.v2(t, b.Addr), SessionTimeout: groupSession})
		})
	}
}

const migrationGroup = "orders-processor"
