package log

import (
	"encoding/binary"
	"errors"
	"reflect"
	"testing"

	"github.com/strandlog/strand/internal/model"
)

// fuzzSeeds are valid batches of every codec and some broken ones.
func fuzzSeeds(f *testing.F) [][]byte {
	var seeds [][]byte
	for _, c := range rvCodecs {
		seeds = append(seeds,
			rvBuild(f, c, rvRecords(7), nil),
			rvBuild(f, c, rvKeyed(3), rvKeyedHeader),
			rvKmsgBatch(f, c, rvKeyed(2), c == model.CompressionSnappy))
	}
	good := rvBuild(f, model.CompressionNone, rvKeyed(2), rvKeyedHeader)
	flipped := append([]byte{}, good...)
	flipped[len(flipped)-1] ^= 1
	magic1 := append([]byte{}, good...)
	magic1[model.BatchMagicPos] = 1
	return append(seeds, good[:len(good)-1], flipped, magic1, good[:model.BatchHeaderSize], nil)
}

// fixFraming makes the length field and CRC agree with b, so the fuzzer's
// mutations reach the record parsing instead of failing the CRC.
func fixFraming(b []byte) {
	if len(b) >= model.BatchHeaderSize {
		binary.BigEndian.PutUint32(b[model.BatchLengthPos:], uint32(len(b)-model.BatchLengthOverhead))
		rvFixCRC(b)
	}
}

var validateErrors = []error{
	ErrCorruptMessage, ErrInvalidRecord, ErrUnsupportedMagic,
	ErrUnsupportedCompression, ErrMessageTooLarge, ErrInvalidTimestamp,
}

func isKnown(err error, kinds ...error) bool {
	for _, k := range kinds {
		if errors.Is(err, k) {
			return true
		}
	}
	return false
}

func FuzzValidateBatch(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s, false, false)
		f.Add(s, true, true)
	}
	f.Fuzz(func(t *testing.T, in []byte, fix, requireKeys bool) {
		b := append([]byte{}, in...)
		if fix {
			fixFraming(b)
		}
		opts := &validateOptions{requireKeys: requireKeys, now: rvBaseTimestamp, maxTimestampAgo: 1 << 41, maxTimestampAhead: 1 << 41}
		info, err := validateBatch(b, opts)
		if err != nil {
			if !isKnown(err, validateErrors...) {
				t.Fatalf("untyped error: %v", err)
			}
			return
		}
		if info.size != len(b) || info.count <= 0 || info.count != info.lastOffsetDelta+1 {
			t.Fatalf("accepted with info %+v", info)
		}
		// A compressed batch is read only when keys are required; else its
		// CRC is all that vouches for its payload.
		read := info.compression == model.CompressionNone || requireKeys
		var n int32
		err = forEachRecord(b, func(r *Record) error {
			if read && (r.OffsetDelta != n || (requireKeys && r.Key == nil)) {
				t.Fatalf("record %d accepted: %+v", n, r)
			}
			n++
			return nil
		})
		switch {
		case read && (err != nil || n != info.count):
			t.Fatalf("validated batch of %d records: forEachRecord read %d: %v", info.count, n, err)
		case err != nil && !errors.Is(err, ErrCorruptMessage):
			t.Fatalf("untyped error: %v", err)
		}
	})
}

func FuzzForEachRecord(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, in []byte, fix bool) {
		b := append([]byte{}, in...)
		if fix {
			fixFraming(b)
		}
		var recs []Record
		err := forEachRecord(b, func(r *Record) error {
			recs = append(recs, rvCloneRecord(r))
			return nil
		})
		if err != nil {
			if !isKnown(err, ErrCorruptMessage, ErrUnsupportedCompression) {
				t.Fatalf("untyped error: %v", err)
			}
			return
		}
		bt := model.Batch(b)
		if int32(len(recs)) != bt.RecordCount() {
			t.Fatalf("%d records, header says %d", len(recs), bt.RecordCount())
		}
		// What decodes re-encodes to the same records.
		h := batchHeader{
			BaseOffset: bt.BaseOffset(), PartitionLeaderEpoch: bt.PartitionLeaderEpoch(), Attributes: bt.Attributes(),
			LastOffsetDelta: bt.LastOffsetDelta(), BaseTimestamp: bt.BaseTimestamp(), MaxTimestamp: bt.MaxTimestamp(),
			ProducerID: bt.ProducerID(), ProducerEpoch: bt.ProducerEpoch(), BaseSequence: bt.BaseSequence(),
		}
		again, err := appendBatch(nil, h, recs)
		if err != nil {
			t.Fatalf("re-encoding: %v", err)
		}
		if err := checkCRC(again); err != nil {
			t.Fatal(err)
		}
		if got := rvCollect(t, again); !reflect.DeepEqual(got, recs) {
			t.Fatalf("re-encoded records differ:\n got %+v\nwant %+v", got, recs)
		}
	})
}
