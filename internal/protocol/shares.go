package protocol

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/config"
	"github.com/strandlog/strand/internal/model"
	"github.com/strandlog/strand/internal/replica"
	"github.com/strandlog/strand/internal/share"
)

// What the share group handlers share: the members' APIs
// (ShareGroupHeartbeat, ShareFetch, ShareAcknowledge), the share-group
// state between brokers (83-87) and the offsets admin APIs (90-92).

// ShareVersionFeature is the feature that turns share groups (KIP-932) on:
// at level 1 their APIs are served and listed by ApiVersions. It is 1
// unless an operator finalizes another level, as in a cluster Kafka 4.2 or
// later formats (kafka-features.sh downgrade --feature share.version=0
// turns share groups off). The share-partitions' state is durable in
// __share_group_state, the groups (their epochs and topics) in
// __consumer_offsets; the members are kept in memory, and join again when
// the coordinator moves.
const ShareVersionFeature = "share.version"

// errSharesOff answers the share group APIs while share.version is 0, as
// Kafka answers them.
var errSharesOff = newAPIError(kerr.UnsupportedVersion, "Share groups are off in this cluster (the share.version feature is 0).")

// shareAPIs are the APIs served only while share groups are on.
var shareAPIs = []int16{76, 77, 78, 79, 83, 84, 85, 86, 87, 90, 91, 92}

// Shares is what the share group handlers reach.
type Shares struct {
	// Groups holds the members of the share groups this broker
	// coordinates.
	Groups *share.Coordinator
	// Leader holds the share-partitions of the partitions this broker
	// leads, and the members' share sessions with it.
	Leader *share.Leader
	// Limits gives a group's share-partition settings: its group configs
	// over the broker's.
	Limits func(group string) share.Limits
	// AutoOffsetReset is a group's share.auto.offset.reset: where a
	// share-partition it reads for the first time starts (earliest,
	// latest, or by_duration:<ISO-8601 duration> before now).
	AutoOffsetReset func(group string) string
	// IsolationLevel is a group's share.isolation.level:
	// read_uncommitted, or read_committed, which reads up to the last
	// stable offset and never delivers an aborted transaction's records.
	IsolationLevel func(group string) string
	// State keeps the share-partitions' state durable.
	State ShareState
	// Persist writes a share group's records to its __consumer_offsets
	// partition, and returns once they are durable.
	Persist func(group string, recs []model.KeyValue) error
	Now     func() time.Time
}

// ShareState is where the share-partitions' state is kept (the share
// coordinator's __share_group_state). Ensure makes the topic if need be;
// Read and Change never do (a leader calls them under a share-partition's
// lock, the offsets admin APIs without one). Read
// and Change reach the broker that keeps a key's state; ReadLocal and
// ChangeLocal, which serve the share-group state APIs, only this one
// (NOT_COORDINATOR elsewhere).
type ShareState interface {
	Ensure() error
	Read(k share.Key) (share.Saved, bool, error)
	Change(k share.Key, c share.Change) error
	ReadLocal(k share.Key) (share.Saved, bool, error)
	ChangeLocal(k share.Key, c share.Change) error
}

// sharePartition is the share-partition of key over p, which this broker
// leads: as held, or read from its saved state, or, the first time the
// group reads the partition, started where the group's
// share.auto.offset.reset says, and that start saved before any record is
// acquired. A share-partition held from another leader epoch is read
// again: another leader may have changed it meanwhile.
func (b *Broker) sharePartition(key share.Key, p Partition) (*share.SharePartition, error) {
	s := b.Shares
	epoch := p.LeaderEpoch()
	if sp := s.Leader.Get(key); sp != nil && sp.LeaderEpoch == epoch {
		sp.Mu.Lock()
		ready := sp.P != nil
		sp.Mu.Unlock()
		if ready {
			return sp, nil
		}
	}
	if err := s.State.Ensure(); err != nil {
		return nil, stateError(err)
	}
	sp := s.Leader.GetOrAdd(key, nil, epoch)
	sp.Mu.Lock()
	defer sp.Mu.Unlock()
	if sp.P != nil {
		return sp, nil
	}
	limits := s.Limits(key.Group)
	saved, found, err := s.State.Read(key)
	if err != nil {
		return nil, stateError(err)
	}
	if found {
		sp.P, sp.StateEpoch = share.Restore(saved.Start, saved.Batches, limits), saved.StateEpoch
		return sp, nil
	}
	start := p.HighWatermark()
	switch reset := s.AutoOffsetReset(key.Group); {
	case reset == "earliest":
		start = p.StartOffset()
	case strings.HasPrefix(reset, "by_duration:"):
		// The first record at or after now less the duration; the end
		// when there is none.
		if d, err := config.ShareResetDuration(reset); err == nil {
			if o, _, err := p.ListOffset(s.Now().Add(-d).UnixMilli(), false); err == nil && o >= 0 {
				start = o
			}
		}
	}
	// The first state of the key, at state epoch 0.
	if err := s.State.Change(key, share.Change{Kind: share.ChangeInitialize, Start: start}); err != nil {
		return nil, stateError(err)
	}
	sp.P, sp.StateEpoch = share.New(start, limits), 0
	return sp, nil
}

// persistShareGroup writes a share group's records to __consumer_offsets
// when they say less than it is now (its topics changed), or always with
// force, and returns once they are durable.
func (b *Broker) persistShareGroup(group string, force bool) error {
	recs, written := b.Shares.Groups.Records(group, force)
	if recs == nil || b.Shares.Persist == nil {
		return nil
	}
	if err := b.Shares.Persist(group, recs); err != nil {
		return err
	}
	written()
	return nil
}

// stateError is a failure to read or write the share-group state, as the
// share APIs answer it.
func stateError(err error) error {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return err
	}
	return fmt.Errorf("%w: the share-group state: %v", kerr.CoordinatorNotAvailable, err)
}

// sharesServed reports whether share groups are on.
func (b *Broker) sharesServed() bool {
	return b.Shares != nil && b.featureLevel(ShareVersionFeature) >= 1
}

// coordinatesGroup reports whether this broker is the coordinator of
// group: it leads the group's __consumer_offsets partition.
func (b *Broker) coordinatesGroup(group string) bool {
	tp, err := b.offsetsPartitionFor(group)
	if err != nil {
		return false
	}
	p, ok := b.Replicas.Get(tp)
	return ok && p.IsLeader()
}

// shareAcquire acquires for member records of sp, which reads p: at most
// maxRecords, in at most maxBytes of whole batches. It returns the batches
// that hold what was acquired, and the runs acquired with their delivery
// counts. A share-partition read for the first time starts where the
// group's share.auto.offset.reset says.
func (b *Broker) shareAcquire(key share.Key, p Partition, member string, maxRecords, maxBytes int) ([]byte, []share.AcquiredRecords, error) {
	s := b.Shares
	now := s.Now()
	sp, err := b.sharePartition(key, p)
	if err != nil {
		return nil, nil, err
	}
	sp.Mu.Lock()
	defer sp.Mu.Unlock()
	if sp.P == nil {
		return nil, nil, nil // fenced meanwhile: read again at the next fetch
	}
	sp.P.SetLimits(s.Limits(key.Group))
	sp.P.MoveStart(p.StartOffset())
	from, ok := sp.P.NextFetchOffset(now)
	committed := s.IsolationLevel(key.Group) == "read_committed"
	bound := p.HighWatermark()
	if committed {
		bound = p.LastStableOffset()
	}
	if !ok || from >= bound {
		return nil, nil, nil
	}
	sec, err := p.Read(from, maxBytes, committed)
	if err != nil {
		return nil, nil, err
	}
	data, err := sec.ReadAll()
	if err != nil {
		return nil, nil, err
	}
	type span struct {
		first, last int64
		bytes       []byte
	}
	var aborted []replica.AbortedTxn
	if committed {
		aborted = p.AbortedTransactions(from, bound)
	}
	var present []share.Range
	var batches []span
	r := model.NewBatchReader(data)
	for bt, ok := r.Next(); ok; bt, ok = r.Next() {
		first, last := bt.BaseOffset(), bt.LastOffset()
		if bt.IsControl() {
			continue // a marker: no record to deliver, archived as it is passed
		}
		if bt.IsTransactional() && slices.ContainsFunc(aborted, func(a replica.AbortedTxn) bool {
			return a.ProducerID == bt.ProducerID() && a.FirstOffset <= first && a.LastOffset > last
		}) {
			sp.P.Archive(first, last) // an aborted transaction's: never delivered
			continue
		}
		present = append(present, share.Range{First: first, Last: last})
		batches = append(batches, span{first, last, bt})
	}
	acquired := sp.P.Acquire(member, present, maxRecords, now)
	var out []byte
	for _, bt := range batches {
		for _, a := range acquired {
			if a.First <= bt.last && a.Last >= bt.first {
				out = append(out, bt.bytes...)
				break
			}
		}
	}
	return out, acquired, nil
}

// shareAcknowledge applies member's acknowledgement batches to the
// share-partition of key, and answers once the state they leave is
// durable; if it cannot be made so, none of them is applied. The first
// error is the partition's answer.
func (b *Broker) shareAcknowledge(key share.Key, member string, batches []shareAckBatch) error {
	sp := b.Shares.Leader.Get(key)
	if sp == nil {
		return share.ErrInvalidRecordState
	}
	now := b.Shares.Now()
	sp.Mu.Lock()
	defer sp.Mu.Unlock()
	if sp.P == nil {
		return share.ErrInvalidRecordState
	}
	before := sp.P.Clone()
	var first error
	applied := false
	for _, a := range batches {
		types := make([]share.AckType, len(a.types))
		for i, t := range a.types {
			types[i] = share.AckType(t)
		}
		err := sp.P.Acknowledge(member, a.first, a.last, types, now)
		if err != nil && first == nil {
			first = err
		}
		applied = applied || err == nil
	}
	if applied {
		err := b.Shares.State.Change(key, share.Change{Kind: share.ChangeWrite, StateEpoch: sp.StateEpoch,
			LeaderEpoch: sp.LeaderEpoch, Start: sp.P.Start(), Batches: sp.P.StateBatches()})
		if errors.Is(err, share.ErrFencedStateEpoch) {
			// Started over (AlterShareGroupOffsets) since it was read:
			// what this leader holds is of the old state, and is read
			// again at the next fetch. The member holds nothing of it.
			sp.P = nil
			return fmt.Errorf("%w: the share-partition's offsets were reset", share.ErrInvalidRecordState)
		}
		if err != nil {
			sp.P = before
			return stateError(err)
		}
	}
	return first
}

type shareAckBatch struct {
	first, last int64
	types       []int8
}

// releaseMember gives back what member holds on the share-partitions of
// keys: its share session ended, or it stopped fetching from them.
func (b *Broker) releaseMember(keys []share.Key, member string) {
	for _, k := range keys {
		if sp := b.Shares.Leader.Get(k); sp != nil {
			sp.Mu.Lock()
			if sp.P != nil {
				sp.P.ReleaseMember(member)
			}
			sp.Mu.Unlock()
		}
	}
}

// shareLeader is the current leader of a partition this broker does not
// lead, as ShareFetch and ShareAcknowledge answer it.
func (b *Broker) shareLeader(topic string, partition int32) (id, epoch int32) {
	t, ok := b.Cluster.Topic(topic)
	if !ok || int(partition) >= len(t.States) {
		return -1, -1
	}
	st := t.States[partition]
	return st.Leader, st.LeaderEpoch
}

// nodeEndpoints lists the brokers named by leader ids, on the request's
// listener, for the answers that point to a new leader.
func (b *Broker) nodeEndpoints(r *Request, ids map[int32]bool) []kmsg.ShareFetchResponseNodeEndpoint {
	var out []kmsg.ShareFetchResponseNodeEndpoint
	for _, br := range b.Cluster.Brokers() {
		if !ids[br.NodeID] {
			continue
		}
		e, ok := br.Endpoint(r.Listener)
		if !ok {
			continue
		}
		ep := kmsg.NewShareFetchResponseNodeEndpoint()
		ep.NodeID, ep.Host, ep.Port = br.NodeID, e.Host, e.Port
		if br.Rack != "" {
			rack := br.Rack
			ep.Rack = &rack
		}
		out = append(out, ep)
	}
	return out
}

// ShareClientDisconnected ends the share sessions of a connection that
// closed: their members' records go back at once, not when their locks
// run out.
func (b *Broker) ShareClientDisconnected(remote string) {
	if b.Shares == nil {
		return
	}
	gone := b.Shares.Leader.ConnectionClosed(remote)
	for k, keys := range gone {
		b.releaseMember(keys, k.Member)
	}
	if len(gone) > 0 {
		b.Shares.Leader.NotifyReleased()
	}
}
