package server_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandlog/strand/internal/config"
	"github.com/strandlog/strand/internal/group"
	"github.com/strandlog/strand/internal/testutil"
	"github.com/strandlog/strand/test/grouptest"
)

// The migration playbook (test/grouptest.RunPlaybook) against an in-process
// broker, franz-go as both v1 and v2 (cooperative-sticky, and eager range,
// where every rebalance revokes everything), cross-checked with the coordinator's
// rebalance history: the hand-offs it recorded are the changes of owner the
// consumers logged, with the committed offsets they logged, and each new
// owner's first fetch is the committed offset. test/compat runs the same
// playbook against the real binary, with the Java client as v1 too.

const migrationGroup = "orders-processor"

func TestMigrationPlaybook(t *testing.T) {
	for _, bal := range []kgo.GroupBalancer{kgo.CooperativeStickyBalancer(), kgo.RangeBalancer()} {
		t.Run(bal.ProtocolName(), func(t *testing.T) {
			b := testutil.StartBroker(t, func(c *config.Broker) {
				c.GroupInitialRebalanceDelay = 100 * time.Millisecond
				c.GroupMinSessionTimeout = 500 * time.Millisecond
			})
			const partitions = 10
			createTopic(t, b.Addr, "orders", partitions)
			const session = 3 * time.Second
			start := func(name string) (grouptest.Member, error) {
				c, err := grouptest.StartConsumer(grouptest.ConsumerConfig{Name: name, Addr: b.Addr, Group: migrationGroup,
					Topic: "orders", Balancers: []kgo.GroupBalancer{bal}, SessionTimeout: session,
					HeartbeatInterval: 200 * time.Millisecond})
				if err == nil {
					t.Cleanup(func() { c.Kill(); c.Wait() })
				}
				return c, err
			}
			res := grouptest.RunPlaybook(t, grouptest.PlaybookConfig{Addr: b.Addr, Topic: "orders", Group: migrationGroup,
				Partitions: partitions, V1: start, V2: start, SessionTimeout: session, Settle: 700 * time.Millisecond})
			if t.Failed() {
				return
			}
			h, ok := b.Server().Groups().History(migrationGroup)
			if !ok {
				t.Fatal("no rebalance history")
			}
			crossCheckHistory(t, res, h, "orders", "v2-canary")
		})
	}
}

// ownership is a member's consecutive sessions of a partition, merged.
type ownership struct {
	member    string
	sessions  []*grouptest.Session
	committed int64 // highest commit logged in them, -1 if none
	last      int64 // highest offset processed, -1 if none
}

func ownerships(ss []*grouptest.Session) []*ownership {
	var out []*ownership
	for _, s := range ss {
		if n := len(out); n > 0 && out[n-1].member == s.Member {
			o := out[n-1]
			o.sessions = append(o.sessions, s)
			o.committed, o.last = max(o.committed, s.Committed), max(o.last, s.Last())
			continue
		}
		out = append(out, &ownership{member: s.Member, sessions: []*grouptest.Session{s}, committed: s.Committed, last: s.Last()})
	}
	return out
}

// crossCheckHistory compares the broker's hand-offs with the consumers'
// logs, partition by partition: the same sequence of owners; at each
// hand-off the committed offset the logs show (a killed owner may have had
// a commit land that it never logged: then between that and what it
// processed); the new owner's first fetch at the committed offset and
// equal to the first offset it processed, nothing skipped; every record
// processed twice inside the previous owner's sent-but-uncommitted
// window, and no more of them than the hand-off's duplicate risk.
func crossCheckHistory(t *testing.T, res *grouptest.PlaybookResult, h group.History, topic, killed string) {
	t.Helper()
	byPart := map[int32][]group.Handoff{}
	for _, ho := range h.Handoffs {
		if ho.Topic == topic {
			byPart[ho.Partition] = append(byPart[ho.Partition], ho)
		}
	}
	var histBound, dups int64
	for p, ss := range res.Report.Sessions {
		owners := ownerships(ss)
		hos := byPart[p]
		var logNames, histNames []string
		for _, o := range owners {
			logNames = append(logNames, o.member)
		}
		for _, ho := range hos {
			histNames = append(histNames, ho.To.ClientID)
		}
		if !slices.Equal(logNames, histNames) {
			t.Errorf("partition %d: owners %v by the consumers' logs, %v by the broker's hand-offs", p, logNames, histNames)
			continue
		}
		committed := int64(-1) // highest commit logged before each ownership
		for i, ho := range hos {
			o := owners[i]
			what := fmt.Sprintf("partition %d, hand-off %d (%s → %s, generation %d)", p, i, ho.From.ClientID, ho.To.ClientID, ho.Generation)
			var prev *ownership
			if i > 0 {
				prev = owners[i-1]
				if ho.From.ClientID != prev.member {
					t.Errorf("%s: from %s by the logs", what, prev.member)
				}
			} else if ho.From.MemberID != "" {
				t.Errorf("%s: the first assignment has a previous owner", what)
			}
			switch {
			case prev != nil && prev.member == killed:
				if ho.Committed < committed || ho.Committed > max(committed, prev.last+1) {
					t.Errorf("%s: committed %d at the hand-off; the killed owner logged commits up to %d and processed up to %d",
						what, ho.Committed, committed, prev.last)
				}
			case ho.Committed != committed:
				t.Errorf("%s: committed %d at the hand-off, the consumers logged %d", what, ho.Committed, committed)
			}
			if first := o.sessions[0].First(); first >= 0 {
				if ho.FirstFetched != first || ho.FirstFetched != max(ho.Committed, 0) {
					t.Errorf("%s: first fetch at %d, first record processed %d, committed %d", what, ho.FirstFetched, first, ho.Committed)
				}
			}
			if ho.FirstFetched >= 0 && ho.Skipped() != 0 {
				t.Errorf("%s: the broker reports %d skipped", what, ho.Skipped())
			}
			if prev != nil {
				histBound += max(0, ho.DuplicateRisk())
				if prev.last >= 0 && ho.LastSent < prev.last+1 {
					t.Errorf("%s: %s processed up to %d, the broker sent it up to %d", what, prev.member, prev.last, ho.LastSent)
				}
				// Records processed by both: inside [Committed, what prev was sent).
				upTo := ho.LastSent
				both := int64(0)
				seen := map[int64]bool{}
				for _, s := range prev.sessions {
					for _, off := range s.Offsets {
						seen[off] = true
					}
				}
				for _, s := range o.sessions {
					for _, off := range s.Offsets {
						if !seen[off] {
							continue
						}
						dups++
						both++
						if off < ho.Committed || off >= upTo {
							t.Errorf("%s: %d processed by both, outside [%d, %d)", what, off, ho.Committed, upTo)
						}
					}
				}
				if risk := ho.DuplicateRisk(); both > risk {
					t.Errorf("%s: %d records processed by both, the broker reports a duplicate risk of %d", what, both, risk)
				}
			}
			committed = max(committed, o.committed)
		}
	}
	t.Logf("broker history: %d hand-offs of %s; records processed again after a hand-off %d; "+
		"duplicate risk the broker reports %d; processed but uncommitted at the hand-offs by the consumers' logs %d",
		len(h.Handoffs), topic, dups, histBound, res.Report.Bound)
}
