package txn_test

import (
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/coordinator"
	"github.com/strandlog/strand/internal/model"
	"github.com/strandlog/strand/internal/txn"
)

// memTopic is __transaction_state in memory, with what the tests read
// and seed it with.
type memTopic struct{ *coordinator.MemTopic }

// stateRecord is one decoded record of __transaction_state.
type stateRecord struct {
	partition int32
	id        string
	value     *kmsg.TxnMetadataValue // nil: tombstone
}

func (m *memTopic) records(t *testing.T) []stateRecord {
	t.Helper()
	var out []stateRecord
	for i := range m.Len() {
		for _, raw := range m.Partition(i).Batches() {
			var rb kmsg.RecordBatch
			if err := rb.ReadFrom(raw); err != nil {
				t.Fatalf("batch: %v", err)
			}
			if rb.Magic != 2 || rb.ProducerID != -1 || rb.Attributes != 0 {
				t.Fatalf("batch header: %+v", rb)
			}
			recs := rb.Records
			for range rb.NumRecords {
				n, w := binary.Varint(recs)
				var r kmsg.Record
				if err := r.ReadFrom(recs[:w+int(n)]); err != nil {
					t.Fatalf("record: %v", err)
				}
				recs = recs[w+int(n):]
				var k kmsg.TxnMetadataKey
				if err := k.ReadFrom(r.Key); err != nil || k.Version != 0 {
					t.Fatalf("key %x: %v", r.Key, err)
				}
				sr := stateRecord{partition: int32(i), id: k.TransactionalID}
				if r.Value != nil {
					sr.value = new(kmsg.TxnMetadataValue)
					if err := sr.value.ReadFrom(r.Value); err != nil {
						t.Fatalf("value: %v", err)
					}
				}
				out = append(out, sr)
			}
		}
	}
	return out
}

// recordsOf are the records of one id, in log order.
func (m *memTopic) recordsOf(t *testing.T, id string) []stateRecord {
	t.Helper()
	var out []stateRecord
	for _, r := range m.records(t) {
		if r.id == id {
			out = append(out, r)
		}
	}
	return out
}

// seed appends a record (nil value: tombstone) as another coordinator (or
// Kafka) would have written it.
func (m *memTopic) seed(t *testing.T, partitions int32, id string, v *kmsg.TxnMetadataValue) {
	t.Helper()
	k := kmsg.NewTxnMetadataKey()
	k.TransactionalID = id
	var val []byte
	if v != nil {
		val = v.AppendTo(nil)
	}
	m.seedRaw(t, partitions, id, k.AppendTo(nil), val)
}

// seedRaw appends one record with the given key and value bytes to id's
// partition.
func (m *memTopic) seedRaw(t *testing.T, partitions int32, id string, key, val []byte) {
	t.Helper()
	parts, _, _ := m.Create(partitions)
	body := []byte{0}                   // attributes
	body = binary.AppendVarint(body, 0) // timestamp delta
	body = binary.AppendVarint(body, 0) // offset delta
	body = binary.AppendVarint(body, int64(len(key)))
	body = append(body, key...)
	if val == nil {
		body = binary.AppendVarint(body, -1)
	} else {
		body = binary.AppendVarint(body, int64(len(val)))
		body = append(body, val...)
	}
	body = binary.AppendVarint(body, 0) // headers
	var recs []byte
	recs = binary.AppendVarint(recs, int64(len(body)))
	recs = append(recs, body...)
	rb := kmsg.NewRecordBatch()
	rb.Magic, rb.ProducerID, rb.ProducerEpoch, rb.FirstSequence = 2, -1, -1, -1
	rb.NumRecords, rb.Records = 1, recs
	raw := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	raw = fixCRC(raw)
	p := m.Partition(int(partitionOf(id, int32(len(parts))))) // led here or not
	if _, wait, err := p.Append(raw); err != nil || wait() != nil {
		t.Fatal("seed append failed")
	}
}

// partitionOf is Kafka's partitioning, written independently of the
// package's.
func partitionOf(id string, n int32) int32 {
	var h int32
	for _, c := range []rune(id) { // ASCII ids in tests
		h = 31*h + c
	}
	if h < 0 {
		if h == -1<<31 {
			return 0
		}
		h = -h
	}
	return h % n
}

// markerCall is one WriteMarkers call.
type markerCall struct {
	pid              int64
	epoch            int16
	commit           bool
	coordinatorEpoch int32
	parts            []model.TopicPartition
}

// fakeMarkers records calls; fail makes the next calls fail (negative:
// all), block makes calls wait until it is closed or ctx ends.
type fakeMarkers struct {
	mu    sync.Mutex
	calls []markerCall
	fail  int
	block chan struct{}
}

var errMarkers = errors.New("marker write failed")

func (f *fakeMarkers) WriteMarkers(ctx context.Context, pid int64, epoch int16, commit bool, ce int32, parts []model.TopicPartition) error {
	f.mu.Lock()
	f.calls = append(f.calls, markerCall{pid, epoch, commit, ce, slices.Clone(parts)})
	block := f.block
	fail := f.fail != 0
	if f.fail > 0 {
		f.fail--
	}
	f.mu.Unlock()
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if fail {
		return errMarkers
	}
	return nil
}

func (f *fakeMarkers) setFail(n int) {
	f.mu.Lock()
	f.fail = n
	f.mu.Unlock()
}

func (f *fakeMarkers) setBlock(ch chan struct{}) {
	f.mu.Lock()
	f.block = ch
	f.mu.Unlock()
}

func (f *fakeMarkers) all() []markerCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// fakeIDs hands out 1000, 1001, ...; with block set, a call waits until
// it is closed.
type fakeIDs struct {
	mu    sync.Mutex
	next  int64
	err   error
	block chan struct{}
}

func (f *fakeIDs) NextProducerID() (int64, error) {
	f.mu.Lock()
	block := f.block
	f.mu.Unlock()
	if block != nil {
		<-block
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return -1, f.err
	}
	id := f.next
	f.next++
	return id, nil
}

// env is a coordinator on a fake clock, an in-memory topic and fake
// markers.
type env struct {
	t       *testing.T
	clock   *coordinator.ManualClock
	topic   *memTopic
	ids     *fakeIDs
	markers *fakeMarkers
	cfg     txn.Config
	c       *txn.Coordinator
	ctx     context.Context
}

const (
	parts   = 5
	timeout = time.Minute
)

func newEnv(t *testing.T, edit func(*txn.Config)) *env {
	t.Helper()
	e := newEnvNoLoad(t, edit)
	e.load()
	return e
}

func newEnvNoLoad(t *testing.T, edit func(*txn.Config)) *env {
	t.Helper()
	e := &env{t: t, clock: coordinator.NewManualClock(), topic: &memTopic{&coordinator.MemTopic{}}, ids: &fakeIDs{next: 1000},
		markers: &fakeMarkers{}, ctx: context.Background()}
	e.cfg = txn.Defaults()
	e.cfg.StatePartitions = parts
	e.cfg.MarkerRetryBackoff = 100 * time.Millisecond // advanceUntil's step
	e.cfg.Clock = e.clock
	e.cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	if edit != nil {
		edit(&e.cfg)
	}
	e.c = txn.New(e.cfg, e.topic, e.ids, e.markers, nil)
	c := e.c
	t.Cleanup(c.Close)
	return e
}

func (e *env) load() {
	e.t.Helper()
	if err := e.c.Load(); err != nil {
		e.t.Fatal(err)
	}
}

// restart closes the coordinator and opens another over the same topic, as
// a broker restart (or, since Close writes nothing, a crash) does.
func (e *env) restart() {
	e.t.Helper()
	e.c.Close()
	e.c = txn.New(e.cfg, e.topic, e.ids, e.markers, nil)
	c := e.c
	e.t.Cleanup(c.Close)
	e.load()
}

// init is a producer's first InitProducerID.
func (e *env) init(id string) (int64, int16) {
	e.t.Helper()
	pid, epoch, err := e.c.InitProducerID(e.ctx, id, timeout, -1, -1)
	if err != nil {
		e.t.Fatalf("InitProducerID(%s): %v", id, err)
	}
	return pid, epoch
}

func (e *env) add(id string, pid int64, epoch int16, tps ...model.TopicPartition) {
	e.t.Helper()
	if err := e.c.AddPartitions(e.ctx, id, pid, epoch, tps); err != nil {
		e.t.Fatalf("AddPartitions(%s): %v", id, err)
	}
}

func (e *env) describe(id string) txn.TxnInfo {
	e.t.Helper()
	ti, err := e.c.Describe(id)
	if err != nil {
		e.t.Fatalf("Describe(%s): %v", id, err)
	}
	return ti
}

// waitState polls until id is in state s (background work runs on its own
// goroutines).
func (e *env) waitState(id, s string) txn.TxnInfo {
	e.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		ti, err := e.c.Describe(id)
		if err == nil && ti.State == s {
			return ti
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%s: state %q (err %v), want %s", id, ti.State, err, s)
		}
		time.Sleep(time.Millisecond)
	}
}

// waitFor polls until cond holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func tp(topic string, p int32) model.TopicPartition {
	return model.TopicPartition{Topic: topic, Partition: p}
}

func fixCRC(raw []byte) []byte {
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	return raw
}

// value is a stored state as Kafka writes it: version 1, no partitions
// unless added, times in the past.
func value(pid int64, epoch int16, state int8, tps ...model.TopicPartition) kmsg.TxnMetadataValue {
	v := kmsg.NewTxnMetadataValue()
	v.Version, v.ProducerID, v.ProducerEpoch, v.TimeoutMillis = 1, pid, epoch, int32(timeout/time.Millisecond)
	v.State = kmsg.TransactionState(state)
	v.LastUpdateTimestamp, v.StartTimestamp = 1_699_999_999_000, -1
	if state != 0 {
		v.Topics = []kmsg.TxnMetadataValueTopic{}
	}
	for _, tp := range tps {
		v.Topics = append(v.Topics, kmsg.TxnMetadataValueTopic{Topic: tp.Topic, Partitions: []int32{tp.Partition}})
		v.StartTimestamp = 1_699_999_998_000
	}
	return v
}

func equalInfo(a, b txn.TxnInfo) bool {
	return a.ID == b.ID && a.State == b.State && a.ProducerID == b.ProducerID && a.ProducerEpoch == b.ProducerEpoch &&
		a.Timeout == b.Timeout && a.Start.Equal(b.Start) && a.LastUpdate.Equal(b.LastUpdate) &&
		slices.Equal(a.Partitions, b.Partitions) && a.ClientVersion == b.ClientVersion
}

func equalStates(a, b []kmsg.TransactionState) bool { return slices.Equal(a, b) }

// advanceUntil moves the clock by the marker retry backoff until id is in
// state s (retries are scheduled from background goroutines).
func (e *env) advanceUntil(id, s string) {
	e.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if ti, err := e.c.Describe(id); err == nil && ti.State == s {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%s never reached %s", id, s)
		}
		e.clock.Advance(e.cfg.MarkerRetryBackoff)
		time.Sleep(time.Millisecond)
	}
}
