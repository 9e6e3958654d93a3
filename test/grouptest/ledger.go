package grouptest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/strandlog/strand/internal/ledger"
	"github.com/strandlog/strand/internal/ledger/reader"
)

// ReadLedger reads the hand-off ledger (__strand_handoffs) of the broker
// at addr, as any Kafka client can: every entry of group, ordered by time.
func ReadLedger(ctx context.Context, addr, group string) ([]ledger.Entry, error) {
	return reader.Read(ctx, []string{addr}, group, time.Time{})
}

// ownership is a member's consecutive sessions of a partition, merged.
type ownership struct {
	member    string
	sessions  []*Session
	committed int64 // highest commit logged in them, -1 if none
	last      int64 // highest offset processed, -1 if none
}

func ownerships(ss []*Session) []*ownership {
	var out []*ownership
	for _, s := range ss {
		if n := len(out); n > 0 && out[n-1].member == s.Member {
			o := out[n-1]
			o.sessions = append(o.sessions, s)
			o.committed, o.last = max(o.committed, s.Committed), max(o.last, s.Last())
			continue
		}
		out = append(out, &ownership{member: s.Member, sessions: []*Session{s}, committed: s.Committed, last: s.Last()})
	}
	return out
}

// CheckLedger compares the broker's hand-off ledger of a playbook run with
// the consumers' logs, partition by partition: the same sequence of
// owners; at each hand-off the committed offset the logs show (a killed
// owner may have had a commit land that it never logged: then between
// that and what it processed); the new owner's first fetch at the
// committed offset and equal to the first offset it processed, nothing
// skipped; every record processed twice inside the previous owner's
// sent-but-uncommitted window, and no more of them than the entry's
// duplicate risk; and no member committed a partition it did not own. It
// waits up to 10 s for the entries the logs call for.
func CheckLedger(t testing.TB, ctx context.Context, addr string, res *PlaybookResult, group, topic, killed string) {
	t.Helper()
	var entries, notOwned []ledger.Entry
	byPart := map[int32][]ledger.Entry{}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		var err error
		if entries, err = ReadLedger(ctx, addr, group); err != nil {
			t.Fatalf("reading the hand-off ledger: %v", err)
		}
		clear(byPart)
		notOwned = notOwned[:0]
		for _, e := range entries {
			switch {
			case e.Topic != topic:
			case e.Type == ledger.TypeHandoff:
				byPart[e.Partition] = append(byPart[e.Partition], e)
			case e.Type == ledger.TypeCommitNotOwned:
				notOwned = append(notOwned, e)
			}
		}
		complete := true
		for p, ss := range res.Report.Sessions {
			complete = complete && len(byPart[p]) >= len(ownerships(ss))
		}
		if complete || time.Now().After(deadline) {
			break
		}
	}
	// Every member committed only what it owned.
	for _, e := range notOwned {
		t.Errorf("the ledger reports a commit of partition %d at %d by %s, which it did not own (owner %+v)",
			e.Partition, *e.Offset, e.Committer.ClientID, e.Owner)
	}
	var risk, dups int64
	for p, ss := range res.Report.Sessions {
		owners := ownerships(ss)
		hos := byPart[p]
		var logNames, ledgerNames []string
		for _, o := range owners {
			logNames = append(logNames, o.member)
		}
		for _, ho := range hos {
			ledgerNames = append(ledgerNames, ho.To.ClientID)
		}
		if !slices.Equal(logNames, ledgerNames) {
			t.Errorf("partition %d: owners %v by the consumers' logs, %v by the broker's ledger", p, logNames, ledgerNames)
			for _, o := range owners {
				t.Logf("partition %d by the logs: %s %v", p, o.member, o.sessions)
			}
			for _, ho := range hos {
				t.Logf("partition %d by the ledger: %+v", p, ho)
			}
			continue
		}
		committed := int64(-1) // highest commit logged before each ownership
		for i, ho := range hos {
			o := owners[i]
			from := ""
			if ho.From != nil {
				from = ho.From.ClientID
			}
			what := fmt.Sprintf("partition %d, hand-off %d (%s → %s, generation %d)", p, i, from, ho.To.ClientID, ho.Generation)
			var prev *ownership
			if i > 0 {
				prev = owners[i-1]
				if from != prev.member {
					t.Errorf("%s: from %s by the logs", what, prev.member)
				}
			} else if ho.From != nil {
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
			if ho.FirstFetched >= 0 && ho.Skipped != 0 {
				t.Errorf("%s: the broker reports %d skipped", what, ho.Skipped)
			}
			if prev == nil {
				committed = max(committed, o.committed)
				continue
			}
			risk += max(0, ho.DuplicateRisk)
			if prev.last >= 0 && ho.LastSent < prev.last+1 {
				t.Errorf("%s: %s processed up to %d, the broker sent it up to %d", what, prev.member, prev.last, ho.LastSent)
			}
			// Records processed by both: inside [Committed, what prev was sent).
			seen := map[int64]bool{}
			for _, s := range prev.sessions {
				for _, off := range s.Offsets {
					seen[off] = true
				}
			}
			both := int64(0)
			for _, s := range o.sessions {
				for _, off := range s.Offsets {
					if !seen[off] {
						continue
					}
					both++
					if off < ho.Committed || off >= ho.LastSent {
						t.Errorf("%s: %d processed by both, outside [%d, %d)", what, off, ho.Committed, ho.LastSent)
					}
				}
			}
			if both > ho.DuplicateRisk {
				t.Errorf("%s: %d records processed by both, the broker reports a duplicate risk of %d", what, both, ho.DuplicateRisk)
			}
			dups += both
			committed = max(committed, o.committed)
		}
	}
	t.Logf("hand-off ledger: %d entries for %s; records processed again after a hand-off %d; "+
		"duplicate risk the broker reports %d; processed but uncommitted at the hand-offs by the consumers' logs %d",
		len(entries), topic, dups, risk, res.Report.Bound)
}

// CheckLinkLedger compares the hand-off ledger of the cluster at addr with
// the consumers' logs of a playbook run across clusters, where link passed
// the group through: every ownership of a partition by a member connected
// there (named in here) that began before until (when the group moved
// home) has an entry of the link handing it the partition, whose first
// fetch is the first offset the member processed and whose committed
// offset (what the member read) is that offset too, nothing skipped; and
// each partition the killed member owned when it died has an entry handing
// it back to the source at a commit between the member's last logged one
// and what it processed (a commit may land that it never logged), whose
// duplicate risk covers what it processed past that commit. It waits up to
// 10 s for the entries.
func CheckLinkLedger(t testing.TB, ctx context.Context, addr string, res *PlaybookResult, group, topic, link, killed string,
	here []string, until time.Time) {
	t.Helper()
	type want struct {
		s    *Session
		lost bool // an entry handing it back (the killed member's)
	}
	var wants []want
	for _, ss := range res.Report.Sessions {
		// A member's consecutive sessions of a partition are one
		// ownership (an eager rebalance revokes and gives it back).
		for _, o := range ownerships(ss) {
			first, last := o.sessions[0], o.sessions[len(o.sessions)-1]
			if !slices.Contains(here, o.member) || !first.Start.Before(until) || first.First() < 0 {
				continue
			}
			wants = append(wants, want{s: first})
			if o.member == killed && last.End == "" {
				wants = append(wants, want{s: last, lost: true})
			}
		}
	}
	if len(wants) == 0 {
		t.Fatal("no session of a member connected through the link to check")
	}
	var problems []string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		entries, err := ReadLedger(ctx, addr, group)
		if err != nil {
			t.Fatalf("reading the hand-off ledger: %v", err)
		}
		problems = problems[:0]
		for _, w := range wants {
			s := w.s
			found := false
			for _, e := range entries {
				if e.Type != ledger.TypeHandoff || e.Link != link || e.Topic != topic || e.Partition != s.Partition {
					continue
				}
				switch {
				case !w.lost && e.To.ClientID == s.Member && e.FirstFetched == s.First():
					found = true
					if e.Committed != s.First() || e.Skipped != 0 {
						problems = append(problems, fmt.Sprintf("%s: the ledger says committed %d, skipped %d", s, e.Committed, e.Skipped))
					}
				case w.lost && e.From != nil && e.From.ClientID == s.Member && e.Reason == "member-disconnected":
					found = true
					// A killed member may have had a commit land that it
					// never logged: between its last logged commit and
					// the end of what it processed.
					past := max(0, s.Last()+1-max(e.Committed, s.TailFrom()))
					switch {
					case e.Committed < s.Committed || e.Committed > s.Last()+1:
						problems = append(problems, fmt.Sprintf("%s: handed back at a commit of %d; the member logged commits up to %d "+
							"and processed up to %d", s, e.Committed, s.Committed, s.Last()))
					case e.DuplicateRisk < past:
						problems = append(problems, fmt.Sprintf("%s: handed back with a duplicate risk of %d (committed %d, sent up to %d), "+
							"the member processed %d past that commit", s, e.DuplicateRisk, e.Committed, e.LastSent, past))
					}
				}
			}
			if !found {
				what := "handing it the partition"
				if w.lost {
					what = "handing the partition back to the source"
				}
				var seen []string
				for _, e := range entries {
					if e.Type == ledger.TypeHandoff && e.Link == link && e.Partition == s.Partition {
						from := "-"
						if e.From != nil {
							from = e.From.ClientID
						}
						seen = append(seen, fmt.Sprintf("%s %s→%s (%s) committed %d first %d", e.Time.Format("15:04:05.000000"),
							from, e.To.ClientID, e.Reason, e.Committed, e.FirstFetched))
					}
				}
				problems = append(problems, fmt.Sprintf("%s: no entry of link %s %s; its entries of the partition: %s", s, link,
					what, strings.Join(seen, "; ")))
			}
		}
		if len(problems) == 0 || time.Now().After(deadline) {
			break
		}
	}
	for _, p := range problems {
		t.Error(p)
	}
}
