package mirrorcheck

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandlog/strand/internal/model"
)

// Options shape a topic comparison.
type Options struct {
	// Ends bounds a partition's comparison to the offsets below its end,
	// for a mirror that may lag a live source. A partition not named is
	// compared whole, each side up to its high watermark.
	Ends map[int32]int64
	// MaxMismatches is how many mismatches a partition report keeps (20
	// when zero); all are counted.
	MaxMismatches int
	// FetchBytes is the size asked of each fetch (1 MiB when zero).
	FetchBytes int32
}

// TopicReport is what a comparison of one topic found.
type TopicReport struct {
	Topic                              string
	SourceID, MirrorID                 [16]byte
	SourcePartitions, MirrorPartitions int32
	// Partitions holds a report for each partition both sides have.
	Partitions []PartitionReport
}

// PartitionReport is what a comparison of one partition found. The
// counts are the source's batches over the range compared, [From, End).
// End is the bound, or the higher of the two high watermarks.
type PartitionReport struct {
	Partition      int32
	Source, Mirror LogRange
	From, End      int64
	Bounded        bool // End came from Options.Ends

	Batches        int64 // every batch in the range
	Records        int64 // records in data batches (aborted ones included)
	ControlBatches int64 // transaction markers
	Codecs         map[model.Compression]int64
	Gaps           int64 // holes in the offsets (the cleaner's, or the log's end)
	GapOffsets     int64 // offsets in those holes

	MismatchCount int64
	Mismatches    []Mismatch // the first Options.MaxMismatches
}

// MismatchKind says how the two sides differ at an offset.
type MismatchKind int

const (
	// Missing: a source batch with no batch at its base offset on the mirror.
	Missing MismatchKind = iota + 1
	// Extra: a mirror batch with no batch at its base offset on the source.
	Extra
	// Differs: batches at the same base offset that are not equal.
	Differs
	// LogStart: the log starts at different offsets.
	LogStart
	// HighWatermark: the logs end at different offsets (or, bounded, a
	// side ends before the bound).
	HighWatermark
)

func (k MismatchKind) String() string {
	switch k {
	case Missing:
		return "missing"
	case Extra:
		return "extra"
	case Differs:
		return "differs"
	case LogStart:
		return "log start"
	case HighWatermark:
		return "high watermark"
	}
	return fmt.Sprintf("MismatchKind(%d)", int(k))
}

// Mismatch is one difference between the two sides.
type Mismatch struct {
	Offset int64 // the batch's base offset, or the lower of two log starts or ends
	Kind   MismatchKind
	// Fields names what differs in a Differs batch: header fields by
	// their names in Kafka's RecordBatch schema, and "Records" for the
	// bytes after the header.
	Fields []string
	Detail string
}

func (m Mismatch) String() string {
	s := fmt.Sprintf("offset %d: %s", m.Offset, m.Kind)
	if len(m.Fields) > 0 {
		s += " (" + strings.Join(m.Fields, ", ") + ")"
	}
	if m.Detail != "" {
		s += ": " + m.Detail
	}
	return s
}

// Equal says whether the mirror equals the source: same topic id, same
// partition count, and no mismatch in any partition.
func (r TopicReport) Equal() bool {
	if r.SourceID != r.MirrorID || r.SourcePartitions != r.MirrorPartitions {
		return false
	}
	for _, p := range r.Partitions {
		if p.MismatchCount > 0 {
			return false
		}
	}
	return true
}

// Totals sums the partitions' counts.
func (r TopicReport) Totals() (batches, records, controlBatches, gaps int64) {
	for _, p := range r.Partitions {
		batches += p.Batches
		records += p.Records
		controlBatches += p.ControlBatches
		gaps += p.Gaps
	}
	return
}

// String describes the report, one line per partition and mismatch.
func (r TopicReport) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "topic %s: ", r.Topic)
	if r.SourceID != r.MirrorID {
		fmt.Fprintf(&b, "topic id %x on the source, %x on the mirror; ", r.SourceID, r.MirrorID)
	}
	if r.SourcePartitions != r.MirrorPartitions {
		fmt.Fprintf(&b, "%d partitions on the source, %d on the mirror; ", r.SourcePartitions, r.MirrorPartitions)
	}
	if r.Equal() {
		b.WriteString("equal")
	} else {
		b.WriteString("NOT equal")
	}
	for _, p := range r.Partitions {
		fmt.Fprintf(&b, "\n  partition %d: [%d, %d) source log %d..%d, mirror log %d..%d: %d batches, %d records, %d control, %d gaps",
			p.Partition, p.From, p.End, p.Source.LogStart, p.Source.HighWatermark, p.Mirror.LogStart, p.Mirror.HighWatermark,
			p.Batches, p.Records, p.ControlBatches, p.Gaps)
		if p.MismatchCount > 0 {
			fmt.Fprintf(&b, "; %d mismatches", p.MismatchCount)
		}
		for _, m := range p.Mismatches {
			fmt.Fprintf(&b, "\n    %s", m)
		}
	}
	return b.String()
}

// CompareTopic compares a topic of the mirror cluster with the same topic
// of the source cluster: ids, partition counts, and every batch of every
// partition.
func CompareTopic(ctx context.Context, source, mirror *kgo.Client, topic string, opts Options) (TopicReport, error) {
	return CompareLogs(ctx, NewReader(source), NewReader(mirror), topic, opts)
}

// CompareLogs is CompareTopic over any two Readers.
func CompareLogs(ctx context.Context, source, mirror Reader, topic string, opts Options) (TopicReport, error) {
	rep := TopicReport{Topic: topic}
	st, err := source.Topic(ctx, topic)
	if err != nil {
		return rep, fmt.Errorf("source: %w", err)
	}
	mt, err := mirror.Topic(ctx, topic)
	if err != nil {
		return rep, fmt.Errorf("mirror: %w", err)
	}
	rep.SourceID, rep.MirrorID = st.ID, mt.ID
	rep.SourcePartitions, rep.MirrorPartitions = st.Partitions, mt.Partitions
	for p := range min(st.Partitions, mt.Partitions) {
		pr, err := comparePartition(ctx, source, mirror, topic, p, opts)
		if err != nil {
			return rep, err
		}
		rep.Partitions = append(rep.Partitions, pr)
	}
	return rep, nil
}

func comparePartition(ctx context.Context, source, mirror Reader, topic string, p int32, opts Options) (PartitionReport, error) {
	rep := PartitionReport{Partition: p, Codecs: map[model.Compression]int64{}}
	keep := opts.MaxMismatches
	if keep <= 0 {
		keep = 20
	}
	fetchBytes := opts.FetchBytes
	if fetchBytes <= 0 {
		fetchBytes = 1 << 20
	}
	note := func(m Mismatch) {
		rep.MismatchCount++
		if len(rep.Mismatches) < keep {
			rep.Mismatches = append(rep.Mismatches, m)
		}
	}
	var err error
	if rep.Source, err = source.Offsets(ctx, topic, p); err != nil {
		return rep, fmt.Errorf("source: %w", err)
	}
	if rep.Mirror, err = mirror.Offsets(ctx, topic, p); err != nil {
		return rep, fmt.Errorf("mirror: %w", err)
	}
	// Unbounded, each side is read to its own high watermark (a batch
	// past the source's is extra).
	rep.End = max(rep.Source.HighWatermark, rep.Mirror.HighWatermark)
	if end, ok := opts.Ends[p]; ok {
		rep.End, rep.Bounded = end, true
	}
	// Below the later log start one side has nothing to compare with.
	rep.From = max(rep.Source.LogStart, rep.Mirror.LogStart)
	if s, m := rep.Source.LogStart, rep.Mirror.LogStart; s != m {
		note(Mismatch{Offset: min(s, m), Kind: LogStart,
			Detail: fmt.Sprintf("the source's log starts at %d, the mirror's at %d", s, m)})
	}
	if s, m := rep.Source.HighWatermark, rep.Mirror.HighWatermark; !rep.Bounded && s != m {
		note(Mismatch{Offset: min(s, m), Kind: HighWatermark,
			Detail: fmt.Sprintf("the source's high watermark is %d, the mirror's %d", s, m)})
	}
	if rep.Bounded {
		for _, side := range []struct {
			name string
			hw   int64
		}{{"source", rep.Source.HighWatermark}, {"mirror", rep.Mirror.HighWatermark}} {
			if side.hw < rep.End {
				note(Mismatch{Offset: side.hw, Kind: HighWatermark,
					Detail: fmt.Sprintf("the %s's high watermark %d is below the bound %d", side.name, side.hw, rep.End)})
			}
		}
	}

	sw := newBatchWalk(source, topic, p, rep.From, rep.End, fetchBytes)
	mw := newBatchWalk(mirror, topic, p, rep.From, rep.End, fetchBytes)
	s, err := sw.Next(ctx)
	if err != nil {
		return rep, fmt.Errorf("source: %w", err)
	}
	m, err := mw.Next(ctx)
	if err != nil {
		return rep, fmt.Errorf("mirror: %w", err)
	}
	expected := rep.From // the offset after the source's last batch
	count := func(b model.Batch) {
		rep.Batches++
		if b.IsControl() {
			rep.ControlBatches++
		} else {
			rep.Records += int64(b.RecordCount())
			rep.Codecs[b.Compression()]++
		}
		if b.BaseOffset() > expected {
			rep.Gaps++
			rep.GapOffsets += b.BaseOffset() - expected
		}
		expected = max(expected, b.LastOffset()+1)
	}
	for s != nil || m != nil {
		advanceSource, advanceMirror := false, false
		switch {
		case m == nil || (s != nil && s.BaseOffset() < m.BaseOffset()):
			note(Mismatch{Offset: s.BaseOffset(), Kind: Missing, Detail: describe(s) + " is not on the mirror"})
			advanceSource = true
		case s == nil || m.BaseOffset() < s.BaseOffset():
			note(Mismatch{Offset: m.BaseOffset(), Kind: Extra, Detail: describe(m) + " is not on the source"})
			advanceMirror = true
		default:
			if fields, detail := diffBatches(s, m); len(fields) > 0 {
				note(Mismatch{Offset: s.BaseOffset(), Kind: Differs, Fields: fields, Detail: detail})
			}
			advanceSource, advanceMirror = true, true
		}
		if advanceSource {
			count(s)
			if s, err = sw.Next(ctx); err != nil {
				return rep, fmt.Errorf("source: %w", err)
			}
		}
		if advanceMirror {
			if m, err = mw.Next(ctx); err != nil {
				return rep, fmt.Errorf("mirror: %w", err)
			}
		}
	}
	if expected < rep.End && expected < rep.Source.HighWatermark {
		// No batch up to the end: the cleaner removed the log's tail.
		rep.Gaps++
		rep.GapOffsets += min(rep.End, rep.Source.HighWatermark) - expected
	}
	return rep, nil
}

// describe names a batch's offsets and kind in a mismatch.
func describe(b model.Batch) string {
	kind := "batch"
	switch {
	case b.IsControl():
		kind = "control batch"
	case b.IsTransactional():
		kind = "transactional batch"
	}
	return fmt.Sprintf("%s %d..%d (%d records, producer %d epoch %d)", kind, b.BaseOffset(), b.LastOffset(),
		b.RecordCount(), b.ProducerID(), b.ProducerEpoch())
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// headerFields are the v2 header's fields after the base offset (which
// both batches share), in order, by their names in Kafka's schema. The
// partition leader epoch is left out: each cluster stamps its own.
var headerFields = []struct {
	name     string
	pos, len int
}{
	{"Length", model.BatchLengthPos, 4},
	{"Magic", model.BatchMagicPos, 1},
	{"CRC", model.BatchCRCPos, 4},
	{"Attributes", model.BatchAttributesPos, 2},
	{"LastOffsetDelta", model.BatchLastDeltaPos, 4},
	{"FirstTimestamp", model.BatchBaseTimestampPos, 8},
	{"MaxTimestamp", model.BatchMaxTimestampPos, 8},
	{"ProducerID", model.BatchProducerIDPos, 8},
	{"ProducerEpoch", model.BatchProducerEpochPos, 2},
	{"FirstSequence", model.BatchBaseSequencePos, 4},
	{"NumRecords", model.BatchRecordCountPos, 4},
}

// diffBatches compares two batches at the same base offset with the
// partition leader epoch masked out: nothing when they are equal, else
// the fields that differ and a description.
func diffBatches(s, m model.Batch) (fields []string, detail string) {
	if bytes.Equal(s[:model.BatchLeaderEpochPos], m[:model.BatchLeaderEpochPos]) &&
		bytes.Equal(s[model.BatchMagicPos:], m[model.BatchMagicPos:]) {
		return nil, ""
	}
	var details []string
	for _, f := range headerFields {
		sv, mv := s[f.pos:f.pos+f.len], m[f.pos:f.pos+f.len]
		if !bytes.Equal(sv, mv) {
			fields = append(fields, f.name)
			details = append(details, fmt.Sprintf("%s %d on the source, %d on the mirror", f.name, beInt(sv), beInt(mv)))
		}
	}
	sr, mr := s.Records(), m.Records()
	if !bytes.Equal(sr, mr) {
		at := 0
		for at < len(sr) && at < len(mr) && sr[at] == mr[at] {
			at++
		}
		fields = append(fields, "Records")
		details = append(details, fmt.Sprintf("records differ from byte %d of %d on the source (%s), %d on the mirror (%s)",
			at, len(sr), around(sr, at), len(mr), around(mr, at)))
	}
	for _, side := range []struct {
		name string
		b    model.Batch
	}{{"source", s}, {"mirror", m}} {
		if crc32.Checksum(side.b[model.BatchAttributesPos:], castagnoli) != side.b.CRC() {
			details = append(details, "the "+side.name+"'s CRC does not match its bytes")
		}
	}
	return fields, strings.Join(details, "; ")
}

// beInt reads a big-endian signed integer of 1, 2, 4 or 8 bytes.
func beInt(b []byte) int64 {
	switch len(b) {
	case 1:
		return int64(int8(b[0]))
	case 2:
		return int64(int16(binary.BigEndian.Uint16(b)))
	case 4:
		return int64(int32(binary.BigEndian.Uint32(b)))
	default:
		return int64(binary.BigEndian.Uint64(b))
	}
}

// around shows up to 8 bytes from at, in hex.
func around(b []byte, at int) string {
	if at >= len(b) {
		return "ends there"
	}
	return hex.EncodeToString(b[at:min(len(b), at+8)])
}
