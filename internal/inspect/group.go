package inspect

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strandlog/strand/internal/ledger"
)

// A group is read whichever protocol it speaks: a classic group answers
// DescribeGroups, a consumer group (KIP-848) ConsumerGroupDescribe, a
// share group (KIP-932) ShareGroupDescribe and DescribeShareGroupOffsets;
// the others are Dead to DescribeGroups, as in Kafka.

// Group is a group with its members and the lag of each partition it
// owns or has committed. -1 is an offset or lag that is not known.
type Group struct {
	Group        string         `json:"group"`
	Type         string         `json:"type"` // classic, consumer or share; empty when the cluster does not know the group
	State        string         `json:"state"`
	ProtocolType string         `json:"protocol_type"`
	Protocol     string         `json:"protocol"` // the classic protocol, or the consumer group's assignor
	Members      []Member       `json:"members"`
	Partitions   []PartitionLag `json:"partitions"` // sorted
	TotalLag     int64          `json:"total_lag"`  // the known lags summed
}

// Member is one member with the partitions it owns.
type Member struct {
	MemberID   string `json:"member_id"`
	InstanceID string `json:"instance_id,omitempty"`
	ClientID   string `json:"client_id"`
	Host       string `json:"host"`
	// Software is the client's software and version, when the caller
	// knows it: DescribeGroups does not carry it (the hand-off ledger
	// does, ledger.SoftwareByMember).
	Software string `json:"software,omitempty"`
	// Status says why a member is held after its connection closed
	// ("connection lost, removed in 2s"), when the caller knows: from the
	// ledger's presence entries (ledger.Holds). "" for a member heard from.
	Status string      `json:"status,omitempty"`
	Owned  []Partition `json:"partitions"` // sorted
}

// Partition names a topic's partition.
type Partition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
}

func (p Partition) String() string { return fmt.Sprintf("%s-%d", p.Topic, p.Partition) }

// PartitionLag is one partition the group owns or has committed: lag
// counts from the commit, or without one from the partition's start, as
// Kafka's tools do. A share group's Committed is its share-partition start
// offset, and its lag the records from there not yet delivered for good.
type PartitionLag struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Committed int64  `json:"committed"`
	End       int64  `json:"end"`
	Lag       int64  `json:"lag"`
	MemberID  string `json:"member_id,omitempty"` // its owner
}

// Exists says whether the group is known to the cluster.
func (g Group) Exists() bool { return g.Type != "" }

// Member is the member with id, if it is one.
func (g Group) Member(id string) (Member, bool) {
	i := slices.IndexFunc(g.Members, func(m Member) bool { return m.MemberID == id })
	if i < 0 {
		return Member{}, false
	}
	return g.Members[i], true
}

// ReadGroup reads group: a group the cluster does not know has no Type.
func ReadGroup(ctx context.Context, adm *kadm.Client, group string) (Group, error) {
	g := Group{Group: group, Members: []Member{}, Partitions: []PartitionLag{}}
	listed, err := adm.ListGroups(ctx)
	if err != nil {
		return g, err
	}
	l, ok := listed[group]
	if !ok {
		return g, nil
	}
	g.Type, g.State, g.ProtocolType = cmp.Or(l.GroupType, "classic"), l.State, l.ProtocolType
	add := func(m Member, parts kadm.TopicsSet) {
		m.Owned = []Partition{}
		parts.Each(func(t string, p int32) { m.Owned = append(m.Owned, Partition{t, p}) })
		slices.SortFunc(m.Owned, ComparePartitions)
		g.Members = append(g.Members, m)
	}
	if g.Type == "share" {
		return readShareGroup(ctx, adm, g)
	}
	if g.Type == "consumer" {
		ds, err := adm.DescribeConsumerGroups(ctx, group)
		if err != nil {
			return g, err
		}
		d := ds[group]
		if d.Err != nil {
			return g, fmt.Errorf("describing group %s: %w", group, d.Err)
		}
		g.State, g.ProtocolType, g.Protocol = d.State, "consumer", d.AssignorName
		for _, m := range d.Members {
			add(Member{MemberID: m.MemberID, InstanceID: deref(m.InstanceID), ClientID: m.ClientID, Host: m.ClientHost}, m.Assignment)
		}
	} else {
		ds, err := adm.DescribeGroups(ctx, group)
		if err != nil {
			return g, err
		}
		d := ds[group]
		if d.Err != nil {
			return g, fmt.Errorf("describing group %s: %w", group, d.Err)
		}
		g.State, g.ProtocolType, g.Protocol = d.State, d.ProtocolType, d.Protocol
		for _, m := range d.Members {
			parts := kadm.TopicsSet{}
			if a, ok := m.Assigned.AsConsumer(); ok {
				for _, t := range a.Topics {
					parts.Add(t.Topic, t.Partitions...)
				}
			}
			add(Member{MemberID: m.MemberID, InstanceID: deref(m.InstanceID), ClientID: m.ClientID, Host: m.ClientHost}, parts)
		}
	}

	commits, err := FetchOffsets(ctx, adm, group)
	if err == nil {
		err = commits.Error()
	}
	if err != nil {
		return g, fmt.Errorf("fetching the offsets of group %s: %w", group, err)
	}
	lags := map[Partition]*PartitionLag{}
	lagOf := func(p Partition) *PartitionLag {
		if pl, ok := lags[p]; ok {
			return pl
		}
		pl := &PartitionLag{Topic: p.Topic, Partition: p.Partition, Committed: -1, End: -1, Lag: -1}
		lags[p] = pl
		return pl
	}
	commits.Each(func(r kadm.OffsetResponse) { lagOf(Partition{r.Topic, r.Partition}).Committed = r.At })
	for _, m := range g.Members {
		for _, p := range m.Owned {
			lagOf(p).MemberID = m.MemberID
		}
	}
	var topics []string
	for p := range lags {
		topics = append(topics, p.Topic)
	}
	slices.Sort(topics)
	topics = slices.Compact(topics)
	if len(topics) > 0 {
		ends, err := adm.ListEndOffsets(ctx, topics...)
		if err != nil {
			return g, fmt.Errorf("listing end offsets: %w", err)
		}
		starts, err := adm.ListStartOffsets(ctx, topics...)
		if err != nil {
			return g, fmt.Errorf("listing start offsets: %w", err)
		}
		for p, pl := range lags {
			end, ok := ends.Lookup(p.Topic, p.Partition)
			if !ok || end.Err != nil {
				continue
			}
			pl.End = end.Offset
			from := pl.Committed
			if from < 0 {
				if start, ok := starts.Lookup(p.Topic, p.Partition); ok && start.Err == nil {
					from = start.Offset
				}
			}
			if from >= 0 {
				pl.Lag = max(0, pl.End-from)
			}
		}
	}
	for _, pl := range lags {
		g.Partitions = append(g.Partitions, *pl)
		g.TotalLag += max(pl.Lag, 0)
	}
	slices.SortFunc(g.Partitions, func(a, b PartitionLag) int {
		return ComparePartitions(Partition{a.Topic, a.Partition}, Partition{b.Topic, b.Partition})
	})
	return g, nil
}

// readShareGroup reads a share group's members (several may share a
// partition; the first is named its owner) and its share-partitions'
// start offsets and lag, as kafka-share-groups.sh --describe shows them.
func readShareGroup(ctx context.Context, adm *kadm.Client, g Group) (Group, error) {
	ds, err := adm.DescribeShareGroups(ctx, g.Group)
	if err != nil {
		return g, err
	}
	d := ds[g.Group]
	if d.Err != nil {
		return g, fmt.Errorf("describing share group %s: %w", g.Group, d.Err)
	}
	g.State, g.ProtocolType, g.Protocol = d.GroupState, "share", d.Assignor
	owner := map[Partition]string{}
	for _, m := range d.Members {
		mem := Member{MemberID: m.MemberID, ClientID: m.ClientID, Host: m.ClientHost, Owned: []Partition{}}
		m.Assignment.Each(func(t string, p int32) {
			mem.Owned = append(mem.Owned, Partition{t, p})
			if _, ok := owner[Partition{t, p}]; !ok {
				owner[Partition{t, p}] = m.MemberID
			}
		})
		slices.SortFunc(mem.Owned, ComparePartitions)
		g.Members = append(g.Members, mem)
	}
	offs, err := adm.DescribeShareGroupOffsets(ctx, g.Group)
	if err != nil {
		return g, fmt.Errorf("describing the offsets of share group %s: %w", g.Group, err)
	}
	do := offs[g.Group]
	if do.Err != nil {
		return g, fmt.Errorf("describing the offsets of share group %s: %w", g.Group, do.Err)
	}
	var topics []string
	for t := range do.Offsets {
		topics = append(topics, t)
	}
	var ends kadm.ListedOffsets
	if len(topics) > 0 { // none would list every topic's
		if ends, err = adm.ListEndOffsets(ctx, topics...); err != nil {
			return g, fmt.Errorf("listing end offsets: %w", err)
		}
	}
	for t, ps := range do.Offsets {
		for p, o := range ps {
			pl := PartitionLag{Topic: t, Partition: p, Committed: o.StartOffset, End: -1, Lag: o.Lag, MemberID: owner[Partition{t, p}]}
			if o.Err != nil {
				pl.Committed, pl.Lag = -1, -1
			}
			if end, ok := ends.Lookup(t, p); ok && end.Err == nil {
				pl.End = end.Offset
			}
			g.Partitions = append(g.Partitions, pl)
			g.TotalLag += max(pl.Lag, 0)
		}
	}
	slices.SortFunc(g.Partitions, func(a, b PartitionLag) int {
		return ComparePartitions(Partition{a.Topic, a.Partition}, Partition{b.Topic, b.Partition})
	})
	return g, nil
}

// ComparePartitions orders partitions by topic, then number.
func ComparePartitions(a, b Partition) int {
	return cmp.Or(strings.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
}

// ListedGroup is a group as a list shows it.
type ListedGroup struct {
	Group        string `json:"group"`
	Type         string `json:"type"`
	State        string `json:"state"`
	ProtocolType string `json:"protocol_type"`
}

// ListGroups is every group of the cluster, sorted.
func ListGroups(ctx context.Context, adm *kadm.Client) ([]ListedGroup, error) {
	gs, err := adm.ListGroups(ctx)
	if err != nil {
		return nil, err
	}
	out := []ListedGroup{}
	for _, g := range gs.Sorted() {
		out = append(out, ListedGroup{Group: g.Group, Type: g.GroupType, State: g.State, ProtocolType: g.ProtocolType})
	}
	return out, nil
}

// retriableFor bounds how long a read asks again after retriable errors.
const retriableFor = 30 * time.Second

// FetchOffsets is a group's committed offsets, asked again while the
// cluster answers with a retriable error (a coordinator still loading, or
// __consumer_offsets just created), as Kafka's own tools wait.
func FetchOffsets(ctx context.Context, adm *kadm.Client, group string) (kadm.OffsetResponses, error) {
	deadline := time.Now().Add(retriableFor)
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		offs, err := adm.FetchOffsets(ctx, group)
		var ke *kerr.Error
		if err == nil || !errors.As(err, &ke) || !ke.Retriable || time.Now().After(deadline) {
			return offs, err
		}
		select {
		case <-ctx.Done():
			return offs, err
		case <-time.After(wait):
		}
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// AddLedger gives g's members what the hand-off ledger's entries es (of
// this group, in time order) say of them at now: their client software,
// and why a member is held after its connection closed.
func (g *Group) AddLedger(es []ledger.Entry, now time.Time) {
	software, holds := ledger.SoftwareByMember(es), ledger.Holds{}
	for _, e := range es {
		holds.Learn(e)
	}
	for i := range g.Members {
		g.Members[i].Software = software[g.Members[i].MemberID]
		g.Members[i].Status = holds.Status(g.Members[i].MemberID, now)
	}
}
