package replica

import (
	"slices"
	"strconv"
	"strings"

	"github.com/strandlog/strand/internal/model"
)

// The special timestamps of a ListOffsets query (Kafka's
// ListOffsetsRequest.*_TIMESTAMP).
const (
	LatestTimestamp        = -1 // the end a consumer of the isolation level sees
	EarliestTimestamp      = -2 // the log start
	MaxTimestamp           = -3 // the record with the largest timestamp
	EarliestLocalTimestamp = -4 // the local log start; with no tiered storage, the log start
	LatestTieredTimestamp  = -5 // the last tiered offset; with none, no answer
)

// TopicPartition names the partition.
func (p *Partition) TopicPartition() model.TopicPartition { return p.TP }

// StartOffset is the log start offset.
func (p *Partition) StartOffset() int64 { return p.log.StartOffset() }

// EndOffset is the log end offset: the next offset an append gets.
func (p *Partition) EndOffset() int64 { return p.log.EndOffset() }

// Size is the bytes the partition's segments hold.
func (p *Partition) Size() int64 { return p.log.Size() }

// RecordsDeletable reports whether the cleanup policy lets records be
// deleted below an offset (it has "delete"; a compacted-only topic does not).
func (p *Partition) RecordsDeletable() bool { return p.log.Config().Delete }

// ListOffset answers a ListOffsets query for timestamp (a time in
// milliseconds or one of the special timestamps above) as a consumer of
// the isolation level sees the partition. The offset and timestamp are
// -1 where Kafka answers none: no record at or after the time, or one not
// visible yet.
func (p *Partition) ListOffset(timestamp int64, readCommitted bool) (offset, ts int64, err error) {
	bound := p.HighWatermark()
	if readCommitted {
		bound = p.LastStableOffset()
	}
	var found bool
	switch timestamp {
	case LatestTimestamp:
		return bound, -1, nil
	case EarliestTimestamp, EarliestLocalTimestamp:
		return p.log.StartOffset(), -1, nil
	case MaxTimestamp:
		offset, ts, found, err = p.log.MaxTimestamp()
	default:
		if timestamp < 0 { // LatestTieredTimestamp and any other: none
			return -1, -1, nil
		}
		offset, ts, found, err = p.log.OffsetForTimestamp(timestamp)
	}
	if err != nil || !found || offset >= bound {
		return -1, -1, err
	}
	return offset, ts, nil
}

// OffsetForLeaderEpoch answers an OffsetForLeaderEpoch query of a leader:
// the largest epoch at most epoch and the offset it ended at (the log end
// for the current epoch). An epoch older than the first the log knows ends
// where the log's first epoch starts; one unknown (negative, or newer than
// the current) is -1, -1.
func (p *Partition) OffsetForLeaderEpoch(epoch int32) (int32, int64) {
	cur := p.LeaderEpoch()
	switch {
	case epoch < 0 || epoch > cur:
		return -1, -1
	case epoch == cur:
		return cur, p.log.EndOffset()
	}
	found, end := p.log.EpochEndOffset(epoch)
	if end < 0 {
		if entries := p.log.Epochs(); len(entries) > 0 && epoch < entries[0].Epoch {
			return epoch, entries[0].StartOffset
		}
	}
	return found, end
}

// LeaderThrottled reports whether this leader's copying to follower is
// capped by the leader replication throttle: the follower is out of sync
// and leader.replication.throttled.replicas names this replica.
func (p *Partition) LeaderThrottled(follower int32) bool {
	list := *p.leaderThrottled.Load()
	if list == "" {
		return false // the usual case, on every follower fetch: no lock taken
	}
	rs := p.ReplicaSet()
	return ThrottleListed(list, p.TP.Partition, rs.Self) && !slices.Contains(rs.ISR, follower)
}

// ThrottleListed reports whether a throttled-replicas list (Kafka's
// "partition:broker" pairs, or "*" for all) names the replica of partition
// on broker.
func ThrottleListed(list string, partition, broker int32) bool {
	if list == "" {
		return false
	}
	if list = strings.TrimSpace(list); list == "*" {
		return true
	}
	want := strconv.FormatInt(int64(partition), 10) + ":" + strconv.FormatInt(int64(broker), 10)
	for pair := range strings.SplitSeq(list, ",") {
		if strings.TrimSpace(pair) == want {
			return true
		}
	}
	return false
}
