package replica

// Compaction of a transactional, compacted partition as its readers see
// it: the log cleans (log.Log.Compact), the partition feeds it the first
// unstable offset and forgets the aborted transactions whose markers it
// removes, and a read_committed consumer, before and after cleaning and
// after a rebuild of the producer state, sees the compaction of what it
// saw before.

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/model"
)

// keyedBatch builds an uncompressed batch of producer pid (-1: plain) with
// the given keys and values ("" value: tombstone), transactional when txn.
func keyedBatch(pid int64, epoch int16, seq int32, txn bool, ts int64, kv ...string) []byte {
	var recs []byte
	for i := 0; i+1 < len(kv); i += 2 {
		var r []byte
		r = append(r, 0)                       // attributes
		r = binary.AppendVarint(r, 0)          // timestamp delta
		r = binary.AppendVarint(r, int64(i/2)) // offset delta
		r = binary.AppendVarint(r, int64(len(kv[i])))
		r = append(r, kv[i]...)
		if kv[i+1] == "" {
			r = binary.AppendVarint(r, -1)
		} else {
			r = binary.AppendVarint(r, int64(len(kv[i+1])))
			r = append(r, kv[i+1]...)
		}
		r = binary.AppendVarint(r, 0) // headers
		recs = binary.AppendVarint(recs, int64(len(r)))
		recs = append(recs, r...)
	}
	n := len(kv) / 2
	b := make([]byte, model.BatchHeaderSize, model.BatchHeaderSize+len(recs))
	binary.BigEndian.PutUint32(b[model.BatchLengthPos:], uint32(model.BatchHeaderSize+len(recs)-model.BatchLengthOverhead))
	b[model.BatchMagicPos] = model.BatchMagic
	if txn {
		binary.BigEndian.PutUint16(b[model.BatchAttributesPos:], model.AttrTransactional)
	}
	binary.BigEndian.PutUint32(b[model.BatchLastDeltaPos:], uint32(n-1))
	binary.BigEndian.PutUint64(b[model.BatchBaseTimestampPos:], uint64(ts))
	binary.BigEndian.PutUint64(b[model.BatchMaxTimestampPos:], uint64(ts))
	binary.BigEndian.PutUint64(b[model.BatchProducerIDPos:], uint64(pid))
	binary.BigEndian.PutUint16(b[model.BatchProducerEpochPos:], uint16(epoch))
	binary.BigEndian.PutUint32(b[model.BatchBaseSequencePos:], uint32(seq))
	binary.BigEndian.PutUint32(b[model.BatchRecordCountPos:], uint32(n))
	b = append(b, recs...)
	binary.BigEndian.PutUint32(b[model.BatchCRCPos:], crc32.Checksum(b[model.BatchAttributesPos:], castagnoli))
	return b
}

// visibleRec is a record a consumer receives.
type visibleRec struct {
	offset     int64
	key, value string
	null       bool
}

func (r visibleRec) String() string { return fmt.Sprintf("%d:%s=%s", r.offset, r.key, r.value) }

// consumeCommitted reads the partition from the log start to the last
// stable offset as a read_committed Kafka consumer does: fetch by fetch,
// each with the aborted transactions the broker names for it, skipping
// the transactional batches of a producer from the first offset of its
// aborted transaction until its abort marker, and every control batch.
func consumeCommitted(t *testing.T, p *Partition) []visibleRec {
	t.Helper()
	var out []visibleRec
	lso := p.LastStableOffset()
	for next := p.Log().StartOffset(); next < lso; {
		sec, err := p.Read(next, 200, true)
		if err != nil {
			t.Fatal(err)
		}
		data, err := sec.ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		if len(data) == 0 {
			break
		}
		aborted := p.AbortedTransactions(next, lso)
		abortedPids := map[int64]bool{}
		for len(data) > 0 {
			var rb kmsg.RecordBatch
			b := model.Batch(data[:model.Batch(data).Size()])
			data = data[len(b):]
			if err := rb.ReadFrom(b); err != nil {
				t.Fatal(err)
			}
			next = b.LastOffset() + 1
			for len(aborted) > 0 && aborted[0].FirstOffset <= b.LastOffset() {
				abortedPids[aborted[0].ProducerID] = true
				aborted = aborted[1:]
			}
			recs := records(t, rb)
			if b.IsControl() {
				var key kmsg.ControlRecordKey
				if err := key.ReadFrom(recs[0].Key); err != nil {
					t.Fatal(err)
				}
				if key.Type == kmsg.ControlRecordKeyTypeAbort {
					delete(abortedPids, b.ProducerID())
				}
				continue
			}
			if b.IsTransactional() && abortedPids[b.ProducerID()] {
				continue
			}
			for _, r := range recs {
				out = append(out, visibleRec{offset: b.BaseOffset() + int64(r.OffsetDelta), key: string(r.Key),
					value: string(r.Value), null: r.Value == nil})
			}
		}
	}
	return out
}

// records decodes the records of an uncompressed batch.
func records(t *testing.T, rb kmsg.RecordBatch) []kmsg.Record {
	t.Helper()
	var out []kmsg.Record
	src := rb.Records
	for range rb.NumRecords {
		n, w := binary.Varint(src)
		if w <= 0 || int(n)+w > len(src) {
			t.Fatalf("bad record length in batch at %d", rb.FirstOffset)
		}
		var r kmsg.Record
		if err := r.ReadFrom(src[:w+int(n)]); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
		src = src[w+int(n):]
	}
	return out
}

// compacted is what compaction must leave of visible records below
// limit: the latest record of each key, in offset order, without
// tombstones (they are older than delete.retention.ms here); records at
// or past limit stay.
func compacted(recs []visibleRec, limit int64) []visibleRec {
	latest := map[string]int64{}
	for _, r := range recs {
		if r.offset < limit {
			latest[r.key] = r.offset
		}
	}
	var out []visibleRec
	for _, r := range recs {
		if r.offset >= limit || latest[r.key] == r.offset && !r.null {
			out = append(out, r)
		}
	}
	return out
}

// TestCompactionPreservesCommittedView writes plain records and committed
// and aborted transactions to a compacted partition, with a transaction
// left open, cleans it, and checks that a read_committed consumer sees the
// compaction of what it saw before (nothing aborted comes back, no
// committed value is lost, nothing at or past the open transaction is
// touched); that the producer state rebuilt from the cleaned log, with and
// without a snapshot, gives the same view and last stable offset; and,
// once the transaction commits, the same for the whole log, with the
// markers whose data is gone removed and their aborted transactions
// forgotten.
func TestCompactionPreservesCommittedView(t *testing.T) {
	e, write, marker, roll := compactingEnv(t, nil)
	compact := func() {
		t.Helper()
		for range 2 { // markers go the pass after their data
			time.Sleep(5 * time.Millisecond) // past delete.retention.ms on the log's clock
			if _, err := e.p.Log().Compact(); err != nil {
				t.Fatal(err)
			}
		}
	}
	uncommittedFrom := func(from int64) []visibleRec { // every record from an offset, markers included
		t.Helper()
		var out []visibleRec
		for next := from; next < e.p.HighWatermark(); {
			sec, err := e.p.Read(next, 1<<20, false)
			if err != nil {
				t.Fatal(err)
			}
			data, err := sec.ReadAll()
			if err != nil || len(data) == 0 {
				t.Fatalf("read at %d: %d bytes, %v", next, len(data), err)
			}
			for len(data) > 0 {
				var rb kmsg.RecordBatch
				b := model.Batch(data[:model.Batch(data).Size()])
				data = data[len(b):]
				if err := rb.ReadFrom(b); err != nil {
					t.Fatal(err)
				}
				for _, r := range records(t, rb) {
					out = append(out, visibleRec{offset: b.BaseOffset() + int64(r.OffsetDelta), key: string(r.Key), value: string(r.Value)})
				}
				next = b.LastOffset() + 1
			}
		}
		return out
	}
	check := func(stage string, want []visibleRec, lso int64) {
		t.Helper()
		if got := consumeCommitted(t, e.p); !slices.Equal(got, want) {
			t.Fatalf("%s: read_committed sees\n %v\nwant\n %v", stage, got, want)
		}
		if got := e.p.LastStableOffset(); got != lso {
			t.Fatalf("%s: last stable offset %d, want %d", stage, got, lso)
		}
	}
	rebuild := func(stage string, want []visibleRec, lso int64) {
		t.Helper()
		e.restart(true)
		check(stage+", restarted from a snapshot", want, lso)
		if err := e.logs.Close(); err != nil {
			t.Fatal(err)
		}
		for _, off := range e.snapshots() {
			if err := os.Remove(filepath.Join(e.p.Log().Dir(), snapshotName(off))); err != nil {
				t.Fatal(err)
			}
		}
		e.logs = nil
		e.open()
		check(stage+", rebuilt from the log", want, lso)
	}

	write(-1, false, "a", "1", "b", "1", "c", "1") // 0-2
	write(1, true, "a", "2", "d", "1")             // 3-4
	marker(1, true)                                // 5
	write(2, true, "b", "2", "c", "")              // 6-7
	marker(2, false)                               // 8
	write(-1, false, "c", "2")                     // 9
	write(1, true, "b", "3")                       // 10
	write(2, true, "a", "9")                       // 11
	marker(1, true)                                // 12
	marker(2, false)                               // 13
	write(-1, false, "d", "")                      // 14
	roll()
	write(3, true, "a", "7")                       // 15: stays open
	write(-1, false, "e", "1", "a", "8", "c", "3") // 16-18
	roll()

	lso := int64(15)
	before := consumeCommitted(t, e.p)
	check("before cleaning", before, lso)
	tail := uncommittedFrom(lso)
	compact()
	after := compacted(before, lso)
	check("open transaction", after, lso)
	if got := uncommittedFrom(lso); !slices.Equal(got, tail) {
		t.Fatalf("records at or past the open transaction changed:\n %v\nwas\n %v", got, tail)
	}
	if got := e.p.AbortedTransactions(0, 1<<62); len(got) != 0 {
		t.Fatalf("aborted transactions kept after their markers went: %v", got)
	}
	rebuild("open transaction", after, lso)

	marker(3, true) // 19
	roll()
	write(-1, false, "f", "1") // 20, in the active segment
	all := consumeCommitted(t, e.p)
	compact()
	end := e.p.HighWatermark()
	final := compacted(all, 20)
	check("all decided", final, end)
	rebuild("all decided", final, end)

	// Every marker's data is gone but p1's second commit (b=3 at 10
	// remains): it alone is left.
	var markers []int64
	for _, r := range uncommittedFrom(0) {
		if r.offset < 20 && len(r.key) == 4 && r.key[0] == 0 && r.key[1] == 0 {
			markers = append(markers, r.offset)
		}
	}
	if !slices.Equal(markers, []int64{12}) {
		t.Fatalf("markers left %v, want [12]", markers)
	}
}

// A commit marker removed by compaction must not strand a producer
// snapshot taken while its transaction was open: a crash, then a rebuild
// from that snapshot, would replay only the log after it, never see the
// marker, and hold the last stable offset at the transaction for good.
func TestCompactionRemovedCommitMarkerAndOldSnapshot(t *testing.T) {
	e, write, marker, roll := compactingEnv(t, func(o *Options) { o.ProducerSnapshotEvery = 1000 })
	write(-1, false, "a", "1") // 0
	write(5, true, "a", "2")   // 1: the transaction opens
	e.restart(true)            // a clean restart snapshots it open at 2
	marker(5, true)            // 2
	roll()
	write(-1, false, "a", "3") // 3: supersedes the transaction's record
	roll()
	write(-1, false, "z", "1") // 4
	for range 2 {              // the data goes, then its marker
		time.Sleep(5 * time.Millisecond)
		if _, err := e.p.Log().Compact(); err != nil {
			t.Fatal(err)
		}
	}
	e.restart(false) // a crash: no snapshot on close
	if lso, hw := e.p.LastStableOffset(), e.p.HighWatermark(); lso != hw {
		t.Fatalf("after the crash: last stable offset %d, high watermark %d", lso, hw)
	}
}

// compactingEnv is a partition of a compacted topic whose tombstones and
// markers go as soon as compaction may remove them, with writers that fail
// the test on error: write appends kv pairs (transactional for a producer
// id >= 0, sequences counted per producer), marker ends a producer's
// transaction, roll seals the active segment.
func compactingEnv(t *testing.T, edit func(*Options)) (e *env, write func(pid int64, txn bool, kv ...string),
	marker func(pid int64, commit bool), roll func()) {
	t.Helper()
	e = newEnv(t, edit)
	e.cfg.Compact, e.cfg.Delete = true, false
	e.cfg.DeleteRetention = time.Millisecond
	if err := e.p.Log().SetConfig(e.cfg.Config); err != nil {
		t.Fatal(err)
	}
	seqs := map[int64]int32{}
	write = func(pid int64, txn bool, kv ...string) {
		t.Helper()
		var seq int32 = -1
		epoch := int16(-1)
		if pid >= 0 {
			seq, epoch = seqs[pid], 0
			seqs[pid] += int32(len(kv) / 2)
		}
		_, wait, err := e.p.Append(keyedBatch(pid, epoch, seq, txn, e.clock.Now().UnixMilli(), kv...))
		if err == nil {
			err = wait()
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	marker = func(pid int64, commit bool) {
		t.Helper()
		_, wait, err := e.p.WriteMarker(Marker{ProducerID: pid, Commit: commit})
		if err == nil {
			err = wait()
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	roll = func() {
		t.Helper()
		if err := e.p.Log().Roll(); err != nil {
			t.Fatal(err)
		}
	}
	return e, write, marker, roll
}
