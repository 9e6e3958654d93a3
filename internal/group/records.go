package group

import (
	"encoding/binary"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/model"
)

// The records of __consumer_offsets, in Kafka's formats so that the topic
// reads the same to Kafka's tools (kafka-console-consumer with its
// formatters, kcat with a decoder):
//
//   - a committed offset: key OffsetCommitKey v1 (group, topic, partition),
//     value OffsetCommitValue v3 (offset, leader epoch, metadata, commit
//     time), or v1 when the commit set an expiry (OffsetCommit v2-4 with a
//     retention time), as Kafka 4 writes them; a null value deletes it.
//   - a group's state: key GroupMetadataKey v2 (group), value
//     GroupMetadataValue v3 (protocol type and name, generation, leader,
//     state time, and each member with its subscription and assignment);
//     a null value deletes the group.
//
// A consumer group's records (KIP-848, key versions 3-8) are in
// consumerrecords.go; keys of other versions (share and streams groups,
// regular expressions) are skipped on replay.
// Each write is one uncompressed batch without a producer id, except a
// TxnOffsetCommit's: a transactional batch (attributes 0x10) carrying the
// transaction's producer id and epoch and base sequence 0, as Kafka's
// coordinator writes it. Its offsets count once the transaction's marker
// (a control batch, written by the transaction coordinator's markers, not
// by this package) commits them.

const (
	offsetKeyVersion   = 1
	offsetValueVersion = 3
	expiringValueVer   = 1
	groupKeyVersion    = 2
	groupValueVersion  = 3
)

func offsetKey(group string, tp model.TopicPartition) []byte {
	k := kmsg.NewOffsetCommitKey()
	k.Version, k.Group, k.Topic, k.Partition = offsetKeyVersion, group, tp.Topic, tp.Partition
	return k.AppendTo(nil)
}

func offsetValue(o offset) []byte {
	v := kmsg.NewOffsetCommitValue()
	v.Version = offsetValueVersion
	if o.ExpireTime >= 0 {
		v.Version = expiringValueVer
		v.ExpireTimestamp = o.ExpireTime
	}
	v.Offset, v.LeaderEpoch, v.Metadata, v.CommitTimestamp = o.Offset, o.LeaderEpoch, o.Metadata, o.CommitTime
	return v.AppendTo(nil)
}

func groupKey(group string) []byte {
	k := kmsg.NewGroupMetadataKey()
	k.Version, k.Group = groupKeyVersion, group
	return k.AppendTo(nil)
}

// Control record types (Kafka's ControlRecordType) that end a
// transaction.
const (
	controlAbort  = 0
	controlCommit = 1
)

// controlType reads a control record's key: int16 version, int16 type.
// Kafka parses any version's type as version 0's, and so does this.
func controlType(key []byte) (int16, bool) {
	if len(key) < 4 {
		return 0, false
	}
	return int16(binary.BigEndian.Uint16(key[2:])), true
}
