package mirrorcheck

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strandlog/strand/internal/model"
)

// spec describes a synthetic record batch.
type spec struct {
	base          int64
	records       int
	producerID    int64
	producerEpoch int16
	sequence      int32
	codec         model.Compression // only named in the attributes: the records stay plain
	transactional bool
	commit        bool // a control batch: a commit marker
	abort         bool // a control batch: an abort marker
	valueSize     int
}

// build encodes s as a v2 batch with a valid CRC.
func build(s spec) []byte {
	var recs []model.KeyValue
	control := s.commit || s.abort
	if control {
		kind := byte(0)
		if s.commit {
			kind = 1
		}
		// Kafka's control record: key version 0 and type; value version 0
		// and the coordinator epoch.
		recs = []model.KeyValue{{Key: []byte{0, 0, 0, kind}, Value: []byte{0, 0, 0, 0, 0, 3}}}
	} else {
		size := max(s.valueSize, 8)
		for i := range s.records {
			v := make([]byte, size)
			for j := range v {
				v[j] = byte(int(s.base) + i + j)
			}
			recs = append(recs, model.KeyValue{Key: fmt.Appendf(nil, "k%d", s.base+int64(i)), Value: v})
		}
	}
	b := model.EncodeBatch(recs, 1_700_000_000_000+s.base, model.NoProducer)
	model.Batch(b).SetBaseOffset(s.base)
	attrs := int16(s.codec)
	if s.transactional || control {
		attrs |= model.AttrTransactional
	}
	if control {
		attrs |= model.AttrControl
	}
	be := binary.BigEndian
	be.PutUint16(b[model.BatchAttributesPos:], uint16(attrs))
	be.PutUint64(b[model.BatchProducerIDPos:], uint64(s.producerID))
	be.PutUint16(b[model.BatchProducerEpochPos:], uint16(s.producerEpoch))
	be.PutUint32(b[model.BatchBaseSequencePos:], uint32(s.sequence))
	reCRC(b)
	return b
}

// reCRC sets the CRC-32C (Castagnoli) over bytes 21 to the end.
func reCRC(b []byte) {
	binary.BigEndian.PutUint32(b[model.BatchCRCPos:], crc32.Checksum(b[model.BatchAttributesPos:], castagnoli))
}

// fakeLog is one partition's log.
type fakeLog struct {
	start, hw int64
	batches   [][]byte
}

// withEpoch copies the log with every batch's partition leader epoch set
// to epoch, as another cluster stamps it.
func (l *fakeLog) withEpoch(epoch int32) *fakeLog {
	c := &fakeLog{start: l.start, hw: l.hw}
	for _, b := range l.batches {
		b = slices.Clone(b)
		model.Batch(b).SetPartitionLeaderEpoch(epoch)
		c.batches = append(c.batches, b)
	}
	return c
}

// fakeCluster serves one topic, "t", from logs in memory, cutting fetches
// as a broker does: whole batches up to the size asked for, then the next
// one cut short; a first batch bigger than the size is cut short too (an
// older broker's way, and the walker's reason to ask again with more).
type fakeCluster struct {
	id      [16]byte
	logs    []*fakeLog
	fetches int
	// fromBatchBefore starts each fetch a batch early, as a broker may
	// that reads from an index entry before the offset asked for.
	fromBatchBefore bool
}

func (f *fakeCluster) Topic(_ context.Context, topic string) (TopicInfo, error) {
	if topic != "t" {
		return TopicInfo{}, kerr.UnknownTopicOrPartition
	}
	return TopicInfo{ID: f.id, Partitions: int32(len(f.logs))}, nil
}

func (f *fakeCluster) Offsets(_ context.Context, _ string, p int32) (LogRange, error) {
	l := f.logs[p]
	return LogRange{LogStart: l.start, HighWatermark: l.hw}, nil
}

func (f *fakeCluster) Fetch(_ context.Context, _ string, p int32, offset int64, maxBytes int32) ([]byte, error) {
	f.fetches++
	l := f.logs[p]
	if offset < l.start || offset > l.hw {
		return nil, kerr.OffsetOutOfRange
	}
	var out []byte
	for i, b := range l.batches {
		mb := model.Batch(b)
		early := f.fromBatchBefore && i+1 < len(l.batches) && model.Batch(l.batches[i+1]).LastOffset() >= offset
		if (mb.LastOffset() < offset && !early) || mb.BaseOffset() >= l.hw {
			continue
		}
		if room := int(maxBytes) - len(out); len(b) > room {
			out = append(out, b[:max(room, 0)]...)
			break
		}
		out = append(out, b...)
	}
	return out, nil
}
