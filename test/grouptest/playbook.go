package grouptest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Member is a group consumer a test drives: franz-go in the test's process
// (Consumer), or a client in its own process that prints the log format.
type Member interface {
	Name() string // its client id, as DescribeGroups shows it
	Log() *Log    // what it printed so far
	Stop() error  // leave cleanly (commit, close), waiting until done
	Kill()        // crash: no commit, no LeaveGroup
}

// Crasher is a Member that can tell it ended on its own (a client process
// that exited): the waits below then fail at once instead of at their
// deadline.
type Crasher interface {
	Crashed() error // non-nil once it ended without Stop or Kill
}

func crashed(ms []Member) error {
	for _, m := range ms {
		if c, ok := m.(Crasher); ok {
			if err := c.Crashed(); err != nil {
				return fmt.Errorf("%s: %w", m.Name(), err)
			}
		}
	}
	return nil
}

// Admin is a kadm client for addr, closed at the end of the test.
func Admin(t testing.TB, addr string) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// Settled says why the group is not settled with exactly ms as its members,
// "" when it is: by the members' logs every partition of topic (0 to
// partitions-1) is owned by exactly one of them, and DescribeGroups shows
// the group Stable with those members (by client id, or by assignment
// where they share one), each assigned what its log says it owns.
func Settled(ctx context.Context, adm *kadm.Client, group, topic string, partitions int, ms []Member) string {
	owned := map[string][]int32{}
	owner := map[int32]string{}
	for _, m := range ms {
		ps := m.Log().Owned()
		owned[m.Name()] = ps
		for _, p := range ps {
			if o, ok := owner[p]; ok {
				return fmt.Sprintf("partition %d owned by %s and %s", p, o, m.Name())
			}
			owner[p] = m.Name()
		}
	}
	if len(owner) != partitions {
		return fmt.Sprintf("%d of %d partitions owned, by the logs: %v", len(owner), partitions, owned)
	}
	ds, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		return err.Error()
	}
	d := ds[group]
	if errors.Is(d.Err, kerr.GroupIDNotFound) || d.Err == nil && d.State == "Dead" && len(ms) > 0 {
		// Not a classic group: DescribeGroups before v6 answers a
		// consumer group as Dead.
		return settledConsumerGroup(ctx, adm, group, topic, owned, ms)
	}
	if d.Err != nil || d.State != "Stable" || len(d.Members) != len(ms) {
		return fmt.Sprintf("group %s with %d members (err %v), want Stable with %d", d.State, len(d.Members), d.Err, len(ms))
	}
	match := newMemberMatch(owned)
	for _, dm := range d.Members {
		var got []int32
		if a, ok := dm.Assigned.AsConsumer(); ok {
			for _, t := range a.Topics {
				if t.Topic == topic {
					got = append(got, t.Partitions...)
				}
			}
		}
		slices.Sort(got)
		if why := match.take(dm.MemberID, dm.ClientID, got, "DescribeGroups"); why != "" {
			return why
		}
	}
	return ""
}

// memberMatch pairs the members a group describes with the members' logs:
// by client id when it is a member's name, else (members that share a
// client id, as kcat's default "rdkafka") by what they are assigned.
type memberMatch struct {
	owned map[string][]int32 // by member name, those not matched yet
}

func newMemberMatch(owned map[string][]int32) *memberMatch {
	return &memberMatch{owned: maps.Clone(owned)}
}

// take matches a described member (assigned got, by source), or says why
// none of the logs fits it.
func (m *memberMatch) take(memberID, clientID string, got []int32, source string) string {
	if want, ok := m.owned[clientID]; ok {
		if !slices.Equal(got, want) {
			return fmt.Sprintf("%s is assigned %v by %s, owns %v by its log", clientID, got, source, want)
		}
		delete(m.owned, clientID)
		return ""
	}
	for _, name := range slices.Sorted(maps.Keys(m.owned)) {
		if slices.Equal(m.owned[name], got) {
			delete(m.owned, name)
			return ""
		}
	}
	return fmt.Sprintf("member %s (client %s) assigned %v by %s is none of the members left by their logs: %v",
		memberID, clientID, got, source, m.owned)
}

// settledConsumerGroup is Settled's check of what the coordinator says
// for a consumer group (KIP-848), which DescribeGroups does not describe:
// stable, every member at the assignment epoch and assigned what its log
// says it owns.
func settledConsumerGroup(ctx context.Context, adm *kadm.Client, group, topic string, owned map[string][]int32, ms []Member) string {
	ds, err := adm.DescribeConsumerGroups(ctx, group)
	if err != nil {
		return err.Error()
	}
	d := ds[group]
	if d.Err != nil || d.State != "Stable" || len(d.Members) != len(ms) {
		return fmt.Sprintf("consumer group %s with %d members (err %v), want Stable with %d", d.State, len(d.Members), d.Err, len(ms))
	}
	match := newMemberMatch(owned)
	for _, dm := range d.Members {
		got := slices.Sorted(maps.Keys(dm.Assignment[topic]))
		if why := match.take(dm.MemberID, dm.ClientID, got, "ConsumerGroupDescribe"); why != "" {
			return why
		}
	}
	return ""
}

func names(ms []Member) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Name()
	}
	return out
}

// WaitSettled waits until Settled, failing t when ctx ends first, and
// returns how long it waited.
func WaitSettled(t testing.TB, ctx context.Context, adm *kadm.Client, group, topic string, partitions int, ms ...Member) time.Duration {
	t.Helper()
	start := time.Now()
	var why string
	for ctx.Err() == nil {
		if why = Settled(ctx, adm, group, topic, partitions, ms); why == "" {
			return time.Since(start)
		}
		if err := crashed(ms); err != nil {
			t.Fatalf("waiting for group %s to settle: %v", group, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("group %s never settled with %v as members (waited %v): %s", group, names(ms), time.Since(start).Round(time.Millisecond), why)
	return 0
}

// Unprocessed is how many produced records no member's log shows
// processed.
func Unprocessed(produced Produced, ms ...Member) int {
	seen := map[int32]map[int64]bool{}
	for _, m := range ms {
		for _, e := range m.Log().Events {
			if e.Kind == Processed {
				if seen[e.Partition] == nil {
					seen[e.Partition] = map[int64]bool{}
				}
				seen[e.Partition][e.Offset] = true
			}
		}
	}
	n := 0
	for p, recs := range produced {
		for o := range recs {
			if !seen[p][o] {
				n++
			}
		}
	}
	return n
}

// WaitProcessed waits until the members between them processed every
// produced record, failing t when ctx ends first.
func WaitProcessed(t testing.TB, ctx context.Context, produced Produced, ms ...Member) {
	t.Helper()
	n := 0
	for ctx.Err() == nil {
		if n = Unprocessed(produced, ms...); n == 0 {
			return
		}
		if err := crashed(ms); err != nil {
			t.Fatalf("waiting for %d records to be processed: %v", n, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%d of %d produced records were never processed", n, produced.Count())
}

// PlaybookConfig is a migration to run: a service's consumers, v1, replaced
// by new ones, v2, in one group while a producer keeps writing.
type PlaybookConfig struct {
	Addr, Topic, Group string
	Partitions         int // of Topic, which must exist
	// V1 and V2 start a member with the given name (its client id); the
	// member must be stopped or killed at the end of the test if the
	// playbook does not get to it.
	V1, V2 func(name string) (Member, error)
	// SessionTimeout is the members' session timeout: the canary's
	// partitions must be back within it (plus a rebalance).
	SessionTimeout time.Duration
	// RollbackWithin, when set, is how soon they must be back instead:
	// the broker removes a member whose connections closed without a
	// LeaveGroup after its disconnect grace.
	RollbackWithin time.Duration
	// BeforeCanary, when set, runs once the v1 consumers settled, before
	// the canary starts (a migration plan).
	BeforeCanary func()
	// AfterScaleOver, when set, runs once the v1 consumers are gone and
	// the v2 ones own every partition, while the producer writes (a group
	// moved home from another cluster).
	AfterScaleOver func(v2 []Member)
	Rate           int           // records per second; default 500
	Settle         time.Duration // how long the group runs between steps; default 1s
	Timeout        time.Duration // for the whole playbook; default 3 minutes
}

// PlaybookResult is what a playbook run produced.
type PlaybookResult struct {
	Produced Produced
	Logs     []*Log // every member's, v1s first, then the canary, then v2s
	Report   *Report
	Rollback time.Duration // from killing the canary to its partitions being back
	// LongestUnowned is the longest time a partition had no owner while
	// the canary joined and during the scale-over (the rollback, bounded
	// by the session timeout, is Rollback), and Unowned that partition.
	LongestUnowned time.Duration
	Unowned        int32
	// TypeWithCanary and TypeAtEnd are the group's type (ListGroups:
	// classic or consumer) once the canary settled and once the last v1
	// consumer stopped.
	TypeWithCanary, TypeAtEnd string
}

// RunPlaybook runs the migration playbook and checks the accounting:
//
//  1. a producer writes keyed records continuously to every partition;
//  2. three v1 consumers form the group;
//  3. a v2 canary joins: it takes partitions and resumes each from its
//     committed offset;
//  4. the canary is killed (the rollback): its partitions go back to the
//     v1 consumers within the session timeout;
//  5. v2 consumers start one by one, each followed by a v1 one's clean stop;
//  6. the producer stops, the v2 consumers process everything and stop.
//
// Then Check: every record processed at least once, none skipped, the
// duplicates within the uncommitted tails at the hand-offs. Failures are
// reported on t.
func RunPlaybook(t testing.TB, cfg PlaybookConfig) *PlaybookResult {
	t.Helper()
	if cfg.Rate == 0 {
		cfg.Rate = 500
	}
	if cfg.Settle == 0 {
		cfg.Settle = time.Second
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 3 * time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Timeout)
	defer cancel()
	adm := Admin(t, cfg.Addr)
	started := time.Now()
	protocol, groupType := "", ""
	step := func(format string, args ...any) {
		t.Logf("playbook %6.2fs: %s", time.Since(started).Seconds(), fmt.Sprintf(format, args...))
	}
	start := func(f func(string) (Member, error), name string) Member {
		t.Helper()
		m, err := f(name)
		if err != nil {
			t.Fatalf("starting %s: %v", name, err)
		}
		return m
	}
	settled := func(ms ...Member) time.Duration {
		t.Helper()
		took := WaitSettled(t, ctx, adm, cfg.Group, cfg.Topic, cfg.Partitions, ms...)
		if ds, err := adm.DescribeGroups(ctx, cfg.Group); err == nil && ds[cfg.Group].Protocol != protocol {
			protocol = ds[cfg.Group].Protocol
			step("the group's protocol is now %s", protocol)
		}
		if ls, err := adm.ListGroups(ctx); err == nil {
			if l, ok := ls[cfg.Group]; ok && l.GroupType != groupType {
				groupType = l.GroupType
				step("the group's type is now %s", groupType)
			}
		}
		return took
	}
	settle := func() {
		select {
		case <-time.After(cfg.Settle):
		case <-ctx.Done():
		}
	}

	prod, err := StartProducer(cfg.Addr, cfg.Topic, cfg.Rate)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if prod != nil {
			prod.Stop(ctx)
		}
	}()
	step("producer writing %d records/s to %s", cfg.Rate, cfg.Topic)

	var v1 []Member
	for i := range 3 {
		v1 = append(v1, start(cfg.V1, fmt.Sprintf("v1-%d", i)))
	}
	step("3 v1 consumers settled after %v", settled(v1...).Round(time.Millisecond))
	settle()

	if cfg.BeforeCanary != nil {
		cfg.BeforeCanary()
	}
	canaryJoined := time.Now()
	canary := start(cfg.V2, "v2-canary")
	took := settled(append(slices.Clone(v1), canary)...)
	windows := []Window{{canaryJoined, time.Now()}}
	typeWithCanary := groupType
	step("v2 canary joined, owns %v, settled after %v", canary.Log().Owned(), took.Round(time.Millisecond))
	settle()
	for ctx.Err() == nil && canary.Log().Count(Processed) == 0 {
		time.Sleep(50 * time.Millisecond)
	}
	// Kill it with records processed and not yet committed, if that comes
	// within a few seconds: the interesting rollback.
	for deadline := time.Now().Add(3 * time.Second); ctx.Err() == nil && time.Now().Before(deadline); {
		if uncommitted(canary.Log()) > 0 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	step("v2 canary processed %d records, %d not yet committed; killing it", canary.Log().Count(Processed), uncommitted(canary.Log()))
	killed := time.Now()
	canary.Kill()
	settled(v1...)
	rollback := time.Since(killed)
	step("rollback: the canary's partitions are back with the v1 consumers after %v (session timeout %v)",
		rollback.Round(time.Millisecond), cfg.SessionTimeout)
	if cfg.RollbackWithin > 0 && rollback > cfg.RollbackWithin {
		t.Errorf("the canary's partitions came back after %v, more than %v", rollback, cfg.RollbackWithin)
	} else if limit := cfg.SessionTimeout + 5*time.Second; cfg.SessionTimeout > 0 && rollback > limit {
		t.Errorf("the canary's partitions came back after %v, more than the session timeout %v and a rebalance", rollback, cfg.SessionTimeout)
	}
	settle()

	scaleOver := time.Now()
	var v2 []Member
	for i := range 3 {
		v2 = append(v2, start(cfg.V2, fmt.Sprintf("v2-%d", i)))
		took := settled(append(slices.Clone(v1[i:]), v2...)...)
		step("%s joined, settled after %v", v2[i].Name(), took.Round(time.Millisecond))
		settle()
		if err := v1[i].Stop(); err != nil {
			t.Errorf("stopping %s: %v", v1[i].Name(), err)
		}
		took = settled(append(slices.Clone(v1[i+1:]), v2...)...)
		step("%s stopped, settled after %v", v1[i].Name(), took.Round(time.Millisecond))
		settle()
	}
	windows = append(windows, Window{scaleOver, time.Now()})
	typeAtEnd := groupType
	if cfg.AfterScaleOver != nil {
		cfg.AfterScaleOver(v2)
		settle()
	}

	p := prod
	prod = nil
	if err := p.Stop(ctx); err != nil {
		t.Errorf("producer: %v", err)
	}
	produced := p.Acked()
	if err := produced.Dense(); err != nil {
		t.Errorf("producer: %v", err)
	}
	step("producer stopped after %d records", produced.Count())
	WaitProcessed(t, ctx, produced, append(append(slices.Clone(v1), canary), v2...)...)
	step("every record processed; stopping the v2 consumers")
	settle()
	for _, m := range v2 {
		if err := m.Stop(); err != nil {
			t.Errorf("stopping %s: %v", m.Name(), err)
		}
	}

	res := &PlaybookResult{Produced: produced, Rollback: rollback, TypeWithCanary: typeWithCanary, TypeAtEnd: typeAtEnd}
	for _, m := range append(append(slices.Clone(v1), canary), v2...) {
		res.Logs = append(res.Logs, m.Log())
	}
	res.LongestUnowned, res.Unowned = LongestUnowned(res.Logs, map[string]time.Time{canary.Name(): killed}, cfg.Partitions, windows...)
	step("longest time a partition went unowned while the canary joined and during the scale-over: %v (partition %d)",
		res.LongestUnowned.Round(time.Millisecond), res.Unowned)
	res.Report = Check(produced, res.Logs...)
	step("%s", res.Report.Summary())
	if !res.Report.OK() {
		t.Errorf("the playbook's accounting failed:\n%s", res.Report.Details(30))
	}
	// The canary resumed each partition it took from the committed offset.
	canaryParts := 0
	for _, ss := range res.Report.Sessions {
		for _, s := range ss {
			if s.Member != canary.Name() || len(s.Offsets) == 0 {
				continue
			}
			canaryParts++
			if s.First() != s.Resumed {
				t.Errorf("the canary began partition %d at %d; %d was committed", s.Partition, s.First(), s.Resumed)
			}
		}
	}
	if canaryParts == 0 {
		t.Errorf("the canary processed no partition")
	}
	for _, l := range res.Logs {
		if l.Name != canary.Name() && !l.Has(Closed) {
			t.Errorf("%s did not close cleanly:\n%s", l.Name, tailLines(l, 10))
		}
	}
	return res
}

// uncommitted is how many records the log shows processed after the
// last commit of their partition.
func uncommitted(l *Log) int {
	n := map[int32]int{}
	for _, e := range l.Events {
		switch e.Kind {
		case Processed:
			n[e.Partition]++
		case Committed:
			for p := range e.Offsets {
				n[p] = 0
			}
		}
	}
	total := 0
	for _, c := range n {
		total += c
	}
	return total
}

// tailLines is the last n non-processed events of a log, as text.
func tailLines(l *Log, n int) string {
	var out []string
	for _, e := range l.Events {
		if e.Kind != Processed {
			out = append(out, fmt.Sprintf("%s %s %v %v %s", e.Kind, e.Time.Format("15:04:05.000"), e.Partitions, e.Offsets, e.Detail))
		}
	}
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return strings.Join(out, "\n")
}

// Window is a span of a run.
type Window struct{ From, To time.Time }

// LongestUnowned is the longest time within the windows that a partition
// of the topic (0 to partitions-1) had no owner by the members' logs, and
// which partition that was. A member in killed owns nothing from its kill
// on; a partition no member has owned yet does not count.
func LongestUnowned(logs []*Log, killed map[string]time.Time, partitions int, windows ...Window) (time.Duration, int32) {
	type change struct {
		at    time.Time
		delta int
	}
	changes := make([][]change, partitions)
	for _, l := range logs {
		own := map[int32]bool{}
		end := func(at time.Time, p int32) {
			if own[p] {
				delete(own, p)
				changes[p] = append(changes[p], change{at, -1})
			}
		}
		for _, e := range l.Events {
			if k, ok := killed[l.Name]; ok && !e.Time.IsZero() && e.Time.After(k) {
				break
			}
			switch e.Kind {
			case Assigned:
				for _, p := range e.Partitions {
					if p >= 0 && int(p) < partitions && !own[p] {
						own[p] = true
						changes[p] = append(changes[p], change{e.Time, +1})
					}
				}
			case Revoked, Lost:
				for _, p := range e.Partitions {
					if p >= 0 && int(p) < partitions {
						end(e.Time, p)
					}
				}
			case Closed:
				for p := range own {
					end(e.Time, p)
				}
			}
		}
		if k, ok := killed[l.Name]; ok {
			for p := range own {
				end(k, p)
			}
		}
	}
	var longest time.Duration
	var which int32 = -1
	for p, cs := range changes {
		slices.SortStableFunc(cs, func(a, b change) int { return a.at.Compare(b.at) })
		owners := 0
		var since time.Time // when it last lost its last owner
		seen := false
		gap := func(from, to time.Time) {
			for _, w := range windows {
				a, b := maxTime(from, w.From), minTime(to, w.To)
				if d := b.Sub(a); d > longest {
					longest, which = d, int32(p)
				}
			}
		}
		for _, c := range cs {
			// Gains before losses at one instant: a hand-off within the
			// same microsecond is no gap.
			if c.delta > 0 {
				if owners == 0 && seen {
					gap(since, c.at)
				}
				owners++
				seen = true
				continue
			}
			owners--
			if owners == 0 {
				since = c.at
			}
		}
		if owners == 0 && seen && len(windows) > 0 {
			gap(since, windows[len(windows)-1].To)
		}
	}
	return longest, which
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
