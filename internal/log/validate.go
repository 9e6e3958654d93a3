package log

import (
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/strandlog/strand/internal/model"
)

// batchSize reads the length field of the batch header at the start of hdr
// (which holds at least model.BatchMagicPos+1 bytes) and returns the whole
// batch size. It returns ErrCorruptMessage when the length is smaller than a
// v2 header's or the size larger than maxSize (maxSize<=0 means no limit),
// and ErrUnsupportedMagic when the magic byte is not 2. The length is checked
// first, as Kafka does, so a zeroed tail of a segment reads as corrupt.
func batchSize(hdr []byte, maxSize int) (int, error) {
	if len(hdr) < model.BatchMagicPos+1 {
		return 0, fmt.Errorf("batch header truncated at %d bytes: %w", len(hdr), ErrCorruptMessage)
	}
	length := int32(binary.BigEndian.Uint32(hdr[model.BatchLengthPos:]))
	size := int64(length) + model.BatchLengthOverhead
	if size < model.BatchHeaderSize {
		return 0, fmt.Errorf("batch length %d below a v2 header's: %w", length, ErrCorruptMessage)
	}
	if maxSize > 0 && size > int64(maxSize) {
		return 0, fmt.Errorf("batch size %d over %d: %w", size, maxSize, ErrCorruptMessage)
	}
	if m := int8(hdr[model.BatchMagicPos]); m != model.BatchMagic {
		return 0, fmt.Errorf("magic %d: %w", m, ErrUnsupportedMagic)
	}
	return int(size), nil
}

// checkCRC verifies the CRC-32C (Castagnoli) of a whole batch.
func checkCRC(b model.Batch) error {
	if err := checkBatchFraming(b); err != nil {
		return err
	}
	if got, want := batchCRC(b), b.CRC(); got != want {
		return fmt.Errorf("crc %08x, header says %08x: %w", got, want, ErrCorruptMessage)
	}
	return nil
}

type validateOptions struct {
	maxBatchBytes     int   // max.message.bytes; <=0 means no limit -> ErrMessageTooLarge when over
	requireKeys       bool  // compacted topic: every record needs a key -> ErrInvalidRecord
	allowControl      bool  // only internal writers may append control batches; else ErrInvalidRecord
	now               int64 // ms, for the timestamp window
	maxTimestampAgo   int64 // message.timestamp.before.max.ms; <=0 means unchecked
	maxTimestampAhead int64 // message.timestamp.after.max.ms; <=0 means unchecked
}

func (o *validateOptions) checksTimestamps() bool {
	return o.maxTimestampAgo > 0 || o.maxTimestampAhead > 0
}

type batchInfo struct {
	size                         int
	count                        int32
	lastOffsetDelta              int32
	firstTimestamp, maxTimestamp int64 // as the header states them
	producerID                   int64
	producerEpoch                int16
	baseSequence                 int32
	compression                  model.Compression
	transactional, control       bool
}

var noOptions validateOptions

// validateBatch checks ONE whole batch b the way Kafka's LogValidator does for
// a produce request: size limit first (MESSAGE_TOO_LARGE), framing and magic,
// CRC, codec, record count against the offset range, control batches, and the
// producer's sequence.
//
// Records are read only where a check needs them. An uncompressed batch is
// always walked (it is cheap): every record's framing, offset deltas 0..n-1 in
// order, keys and timestamps. A compressed batch is decompressed only when
// requireKeys asks for every key; otherwise its CRC, which covers the
// compressed payload, is the whole check, and the timestamp window is applied
// to the header's base (first) and max timestamps. That misses a record in
// the middle of a batch with an older timestamp than the first, a trade we
// take to keep decompression off the produce path. When a compressed batch is
// walked anyway, its records get every check an uncompressed one gets.
//
// Unlike Kafka, nothing is rewritten: the batch is stored as sent, so the max
// timestamp reported is the client's, not one recomputed from the records.
func validateBatch(b []byte, opts *validateOptions) (batchInfo, error) {
	if opts == nil {
		opts = &noOptions
	}
	if err := checkWhole(b, opts); err != nil {
		return batchInfo{}, err
	}
	bt := model.Batch(b)
	info := infoOf(bt)
	if err := checkHeader(bt, &info, opts); err != nil {
		return batchInfo{}, err
	}
	var err error
	switch {
	case info.compression == model.CompressionNone:
		err = checkRecords(bt, bt.Records(), opts)
	case opts.requireKeys:
		err = checkCompressedRecords(bt, opts)
	default:
		err = checkHeaderTimestamps(bt, opts)
	}
	if err != nil {
		return batchInfo{}, err
	}
	return info, nil
}

// checkWhole checks the size limit, the framing, the magic and the CRC.
func checkWhole(b []byte, opts *validateOptions) error {
	if len(b) < model.BatchMagicPos+1 {
		return fmt.Errorf("batch truncated at %d bytes: %w", len(b), ErrCorruptMessage)
	}
	if opts.maxBatchBytes > 0 && len(b) > opts.maxBatchBytes {
		return fmt.Errorf("batch of %d bytes over max.message.bytes %d: %w", len(b), opts.maxBatchBytes, ErrMessageTooLarge)
	}
	size, err := batchSize(b, 0)
	if err != nil {
		return err
	}
	if size != len(b) {
		return fmt.Errorf("batch length says %d bytes, have %d: %w", size, len(b), ErrCorruptMessage)
	}
	return checkCRC(b)
}

func infoOf(b model.Batch) batchInfo {
	return batchInfo{
		size:            len(b),
		count:           b.RecordCount(),
		lastOffsetDelta: b.LastOffsetDelta(),
		firstTimestamp:  b.BaseTimestamp(),
		maxTimestamp:    b.MaxTimestamp(),
		producerID:      b.ProducerID(),
		producerEpoch:   b.ProducerEpoch(),
		baseSequence:    b.BaseSequence(),
		compression:     b.Compression(),
		transactional:   b.IsTransactional(),
		control:         b.IsControl(),
	}
}

// checkHeader applies LogValidator.validateBatch's rules to the header.
func checkHeader(b model.Batch, info *batchInfo, opts *validateOptions) error {
	if info.compression > model.CompressionZstd {
		return fmt.Errorf("codec %d: %w", info.compression, ErrUnsupportedCompression)
	}
	if info.lastOffsetDelta < 0 {
		return fmt.Errorf("last offset delta %d: %w", info.lastOffsetDelta, ErrInvalidRecord)
	}
	if info.count <= 0 {
		return fmt.Errorf("record count %d: %w", info.count, ErrInvalidRecord)
	}
	if int64(info.lastOffsetDelta)+1 != int64(info.count) {
		return fmt.Errorf("last offset delta %d with %d records: %w", info.lastOffsetDelta, info.count, ErrInvalidRecord)
	}
	if info.control && !opts.allowControl {
		return fmt.Errorf("clients may not write control batches: %w", ErrInvalidRecord)
	}
	// A producer's data batch needs a sequence. A transaction marker (a
	// control batch, written only by the broker for a coordinator) names
	// the producer but has no sequence: Kafka writes it with
	// NO_SEQUENCE (-1), and checks sequences for client batches only.
	if info.producerID >= 0 && info.baseSequence < 0 && !(info.control && opts.allowControl) {
		return fmt.Errorf("producer %d with sequence %d: %w", info.producerID, info.baseSequence, ErrInvalidRecord)
	}
	// Every record takes at least 7 bytes, so a count the payload cannot
	// hold is caught without reading it when it is not compressed.
	if info.compression == model.CompressionNone && int64(info.count)*7 > int64(len(b.Records())) {
		return fmt.Errorf("%d records cannot fit %d bytes: %w", info.count, len(b.Records()), ErrCorruptMessage)
	}
	return nil
}

func checkCompressedRecords(b model.Batch, opts *validateOptions) error {
	recs, pooled, err := batchRecords(b)
	if err != nil {
		return err
	}
	if pooled != nil {
		defer putBuf(pooled)
	}
	return checkRecords(b, recs, opts)
}

// checkRecords walks uncompressed records without materialising headers, so
// it allocates nothing.
func checkRecords(b model.Batch, recs []byte, opts *validateOptions) error {
	rr := recordReader{buf: recs}
	count := b.RecordCount()
	base := b.BaseTimestamp()
	// With LogAppendTime the header's max timestamp stands for every record.
	perRecordTS := opts.checksTimestamps() && !b.IsLogAppendTime()
	// Records that break the topic's rules are all named, as Kafka's
	// LogValidator names them (KIP-467); a broken frame ends the walk.
	var refused *RecordErrors
	refuse := func(i int32, kind error, msg string) {
		if refused == nil {
			refused = &RecordErrors{Kind: ErrInvalidRecord}
		}
		if kind == ErrInvalidTimestamp {
			refused.Kind = ErrInvalidTimestamp
		}
		refused.Records = append(refused.Records, RecordError{Index: i, Message: msg})
	}
	for i := range count {
		if why := rr.next(); why != "" {
			return recordsCorrupt(i, why)
		}
		r := &rr.r
		if r.OffsetDelta != i {
			return fmt.Errorf("record %d has offset delta %d: %w", i, r.OffsetDelta, ErrInvalidRecord)
		}
		if opts.requireKeys && r.Key == nil {
			refuse(i, ErrInvalidRecord, "a compacted topic takes no record without a key")
		}
		if perRecordTS {
			if err := checkTimestamp(base+r.TimestampDelta, opts); err != nil {
				refuse(i, ErrInvalidTimestamp, strings.TrimSuffix(err.Error(), ": "+ErrInvalidTimestamp.Error()))
			}
		}
	}
	if rr.pos != len(recs) {
		return fmt.Errorf("%d bytes after the last of %d records: %w", len(recs)-rr.pos, count, ErrCorruptMessage)
	}
	if refused != nil {
		return refused
	}
	if opts.checksTimestamps() && b.IsLogAppendTime() {
		return checkTimestamp(b.MaxTimestamp(), opts)
	}
	return nil
}

func checkHeaderTimestamps(b model.Batch, opts *validateOptions) error {
	if !opts.checksTimestamps() {
		return nil
	}
	if !b.IsLogAppendTime() {
		if err := checkTimestamp(b.BaseTimestamp(), opts); err != nil {
			return fmt.Errorf("base timestamp: %w", err)
		}
	}
	if err := checkTimestamp(b.MaxTimestamp(), opts); err != nil {
		return fmt.Errorf("max timestamp: %w", err)
	}
	return nil
}

// checkTimestamp applies the topic's window around now. The differences are
// taken as unsigned so extreme timestamps cannot overflow into the window.
func checkTimestamp(ts int64, opts *validateOptions) error {
	if ts == noTimestamp {
		return nil
	}
	if ago := opts.maxTimestampAgo; ago > 0 && ts < opts.now && uint64(opts.now)-uint64(ts) > uint64(ago) {
		return fmt.Errorf("timestamp %d more than %d ms before %d: %w", ts, ago, opts.now, ErrInvalidTimestamp)
	}
	if ahead := opts.maxTimestampAhead; ahead > 0 && ts > opts.now && uint64(ts)-uint64(opts.now) > uint64(ahead) {
		return fmt.Errorf("timestamp %d more than %d ms after %d: %w", ts, ahead, opts.now, ErrInvalidTimestamp)
	}
	return nil
}
