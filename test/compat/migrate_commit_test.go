package compat

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/ledger"
	"github.com/strandlog/strand/internal/testutil"
	"github.com/strandlog/strand/test/grouptest"
)

// TestCommitNotOwned: two franz-go members of a group each own one of a
// topic's two partitions, and one commits an offset of the other's
// partition. By default the commit is taken and reported: `strand migrate
// report` lists who committed what over whose ownership, and /metrics
// counts it. With group.commit.ownership.strict the same commit is refused
// with ILLEGAL_GENERATION, while the member's commit of its own partition
// is taken.
func TestCommitNotOwned(t *testing.T) {
	t.Parallel()
	for _, strict := range []bool{false, true} {
		name := map[bool]string{false: "reported", true: "strict"}[strict]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			args := groupBrokerArgs
			if strict {
				args = append(slices.Clone(args), "--group-commit-ownership-strict")
			}
			b := startBroker(t, args...)
			ctx := groupCtx(t, 2*time.Minute)
			const topic, group = "shared", "sharing"
			createTopic(t, b.Addr, topic, 2, nil)
			member := func(id string) *kgo.Client {
				return client(t, b.Addr, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.ClientID(id), kgo.DisableAutoCommit())
			}
			a := member("owner-a")
			member("owner-b")
			owned := ownedPartitions(t, ctx, kadm.NewClient(a), group, topic, "owner-a", "owner-b")

			commit := func(p int32, offset int64) error {
				var err error
				a.CommitOffsetsSync(ctx, map[string]map[int32]kgo.EpochOffset{topic: {p: {Epoch: -1, Offset: offset}}},
					func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, e error) {
						if err = e; err == nil {
							err = kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode)
						}
					})
				return err
			}
			theirs, mine := owned["owner-b"], owned["owner-a"]
			err := commit(theirs, 5)
			if strict {
				if !errors.Is(err, kerr.IllegalGeneration) {
					t.Fatalf("owner-a's commit of owner-b's partition %d: %v, want ILLEGAL_GENERATION", theirs, err)
				}
				if err := commit(mine, 1); err != nil {
					t.Fatalf("owner-a's commit of its own partition %d: %v", mine, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("owner-a's commit of owner-b's partition %d: %v", theirs, err)
			}

			var rep ledger.Report
			var r result
			testutil.EventuallyEvery(t, 10*time.Second, 200*time.Millisecond, func() error {
				if rep, r = migrateReport(t, b.Addr, group); len(rep.CommitsNotOwned) == 0 {
					return fmt.Errorf("migrate report lists no commit not owned:\n%s", r.stdout)
				}
				return nil
			})
			if len(rep.CommitsNotOwned) != 1 || rep.Totals.CommitsNotOwned != 1 {
				t.Fatalf("migrate report lists %d commits not owned (total %d), want 1:\n%s", len(rep.CommitsNotOwned),
					rep.Totals.CommitsNotOwned, r.stdout)
			}
			e := rep.CommitsNotOwned[0]
			if e.Topic != topic || e.Partition != theirs || e.Offset == nil || *e.Offset != 5 || e.Committer == nil ||
				e.Committer.ClientID != "owner-a" || e.Owner == nil || e.Owner.ClientID != "owner-b" {
				t.Fatalf("the commit reported as %+v (committer %+v, owner %+v)", e, e.Committer, e.Owner)
			}
			fams := grouptest.Scrape(t, b.Admin)
			if v, ok := grouptest.Sample(fams, "strand_group_commits_not_owned_total", map[string]string{"group": group}); !ok || v != 1 {
				t.Errorf("strand_group_commits_not_owned_total = %v (%v), want 1", v, ok)
			}
		})
	}
}

// ownedPartitions waits until the group is stable with each of the
// members (by client id) owning one partition of topic, and gives them.
func ownedPartitions(t *testing.T, ctx context.Context, adm *kadm.Client, group, topic string, clientIDs ...string) map[string]int32 {
	t.Helper()
	var owned map[string]int32
	testutil.EventuallyEvery(t, 30*time.Second, 100*time.Millisecond, func() error {
		ds, err := adm.DescribeGroups(ctx, group)
		owned = map[string]int32{}
		if g := ds[group]; err == nil && g.State == "Stable" {
			for _, m := range g.Members {
				if c, ok := m.Assigned.AsConsumer(); ok {
					for _, tp := range c.Topics {
						if tp.Topic == topic && len(tp.Partitions) == 1 {
							owned[m.ClientID] = tp.Partitions[0]
						}
					}
				}
			}
		}
		if len(owned) != len(clientIDs) {
			return fmt.Errorf("group %s not settled with one partition each for %v: %v %+v", group, clientIDs, err, ds[group])
		}
		return nil
	})
	return owned
}
