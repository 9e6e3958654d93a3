package txn

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/model"
)

// The records of __transaction_state, in Kafka's formats so that the topic
// reads the same to Kafka's tools:
//
//   - key TxnMetadataKey v0 (the transactional id);
//   - value TxnMetadataValue v1 (flexible, as Kafka 4 writes it): producer
//     id and epoch, timeout, state, the partitions of the transaction
//     (null for Empty), last update and start times in ms (start -1:
//     none), and the tagged PreviousProducerID, NextProducerID and
//     ClientTransactionVersion of KIP-890;
//   - a null value (tombstone) when the id expires.
//
// Kafka does not store its lastProducerEpoch (the epoch before the last
// bump, used to recognise a retried InitProducerId); neither do we, so such
// a retry across a restart is fenced, as in Kafka. Each write is one
// uncompressed batch of one record without a producer id.

const (
	keyVersion   = 0
	valueVersion = 1
)

func txnKey(id string) []byte {
	k := kmsg.NewTxnMetadataKey()
	k.Version, k.TransactionalID = keyVersion, id
	return k.AppendTo(nil)
}

func txnValue(m *meta) []byte {
	v := kmsg.NewTxnMetadataValue()
	v.Version = valueVersion
	v.ProducerID, v.ProducerEpoch, v.TimeoutMillis = m.pid, m.epoch, m.timeoutMs
	v.State = kmsg.TransactionState(m.state)
	if m.state != stateEmpty {
		v.Topics = []kmsg.TxnMetadataValueTopic{}
		for _, tp := range m.parts {
			if n := len(v.Topics); n == 0 || v.Topics[n-1].Topic != tp.Topic {
				t := kmsg.NewTxnMetadataValueTopic()
				t.Topic = tp.Topic
				v.Topics = append(v.Topics, t)
			}
			t := &v.Topics[len(v.Topics)-1]
			t.Partitions = append(t.Partitions, tp.Partition)
		}
	}
	v.LastUpdateTimestamp, v.StartTimestamp = m.updateMs, m.startMs
	v.PreviousProducerID, v.NextProducerID = m.prevPID, m.nextPID
	v.ClientTransactionVersion = m.clientVer
	return v.AppendTo(nil)
}

// decodeValue reads a TxnMetadataValue of any version.
func decodeValue(b []byte) (meta, error) {
	var v kmsg.TxnMetadataValue
	if err := v.ReadFrom(b); err != nil {
		return meta{}, err
	}
	m := meta{
		state: state(v.State), pid: v.ProducerID, epoch: v.ProducerEpoch, lastEpoch: -1,
		prevPID: v.PreviousProducerID, nextPID: v.NextProducerID, timeoutMs: v.TimeoutMillis,
		startMs: v.StartTimestamp, updateMs: v.LastUpdateTimestamp, clientVer: v.ClientTransactionVersion,
	}
	for _, t := range v.Topics {
		for _, p := range t.Partitions {
			m.parts = append(m.parts, model.TopicPartition{Topic: t.Topic, Partition: p})
		}
	}
	m.parts = sortParts(m.parts)
	return m, nil
}

// sortParts sorts and dedups a partition list in place.
func sortParts(ps []model.TopicPartition) []model.TopicPartition {
	slices.SortFunc(ps, cmpTP)
	return slices.Compact(ps)
}

func cmpTP(a, b model.TopicPartition) int {
	if a.Topic != b.Topic {
		if a.Topic < b.Topic {
			return -1
		}
		return 1
	}
	return int(a.Partition) - int(b.Partition)
}
