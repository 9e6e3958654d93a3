package group_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strandlog/strand/internal/coordinator"
	"github.com/strandlog/strand/internal/group"
)

func txnCommit(g string, pid int64, offsets ...group.CommitOffset) group.TxnCommitRequest {
	return group.TxnCommitRequest{Group: g, ProducerID: pid, ProducerEpoch: 0, Generation: -1, Offsets: offsets}
}

// controlBatch is a transaction marker as Kafka writes it (written here by
// hand, not by the package under test): attributes transactional|control,
// base sequence -1, one record with key int16 version 0 + int16 type (0
// abort, 1 commit) and value int16 version 0 + int32 coordinator epoch.
func controlBatch(pid int64, epoch int16, commit bool) []byte {
	typ := uint16(0)
	if commit {
		typ = 1
	}
	key := binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, 0), typ)
	value := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint16(nil, 0), 0)
	var rec []byte
	rec = append(rec, 0)              // attributes
	rec = binary.AppendVarint(rec, 0) // timestamp delta
	rec = binary.AppendVarint(rec, 0) // offset delta
	rec = binary.AppendVarint(rec, int64(len(key)))
	rec = append(rec, key...)
	rec = binary.AppendVarint(rec, int64(len(value)))
	rec = append(rec, value...)
	rec = binary.AppendVarint(rec, 0) // headers
	be := binary.BigEndian
	b := make([]byte, 61)
	b = binary.AppendVarint(b, int64(len(rec)))
	b = append(b, rec...)
	be.PutUint32(b[8:], uint32(len(b)-12))
	be.PutUint32(b[12:], 0xffffffff)
	b[16] = 2
	be.PutUint16(b[21:], 0x30)
	be.PutUint32(b[23:], 0)
	be.PutUint64(b[27:], 1_700_000_000_000)
	be.PutUint64(b[35:], 1_700_000_000_000)
	be.PutUint64(b[43:], uint64(pid))
	be.PutUint16(b[51:], uint16(epoch))
	be.PutUint32(b[53:], 0xffffffff)
	be.PutUint32(b[57:], 1)
	be.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// writeMarker appends pid's marker to group g's partition, as the
// transaction coordinator does, without telling the group coordinator.
func (e *env) writeMarker(g string, pid int64, commit bool) int32 {
	e.t.Helper()
	part := e.c.PartitionFor(g)
	if _, _, err := e.topic.Partition(int(part)).Append(controlBatch(pid, 0, commit)); err != nil {
		e.t.Fatal(err)
	}
	return part
}

// endTxn writes pid's marker to g's partition and reports it durable, as
// the server does.
func (e *env) endTxn(g string, pid int64, commit bool) {
	e.t.Helper()
	e.c.CompleteTxn(e.writeMarker(g, pid, commit), pid, commit)
}

func (e *env) fetch(g string, requireStable bool, ps ...int32) []group.FetchedOffset {
	e.t.Helper()
	offs, err := e.c.FetchOffsets(g, []group.FetchTopic{{Topic: "t", Partitions: ps}}, requireStable)
	if err != nil {
		e.t.Fatal(err)
	}
	return offs
}

// expect checks the committed offsets of g's partitions (-1: none) and
// which of them a RequireStable fetch reports unstable.
func (e *env) expect(g string, want map[int32]int64, unstable ...int32) {
	e.t.Helper()
	var ps []int32
	for p := range int32(8) {
		if _, ok := want[p]; ok {
			ps = append(ps, p)
		}
	}
	for i, o := range e.fetch(g, false, ps...) {
		if o.Offset != want[ps[i]] || o.Err != nil {
			e.t.Errorf("%s partition %d: %+v, want offset %d", g, ps[i], o, want[ps[i]])
		}
	}
	for i, o := range e.fetch(g, true, ps...) {
		isUnstable := false
		for _, u := range unstable {
			isUnstable = isUnstable || u == ps[i]
		}
		switch {
		case isUnstable && (o.Err != group.ErrUnstableOffsetCommit || o.Offset != -1 || o.LeaderEpoch != -1 || o.Metadata != ""):
			e.t.Errorf("%s partition %d with requireStable: %+v, want UNSTABLE_OFFSET_COMMIT", g, ps[i], o)
		case !isUnstable && (o.Err != nil || o.Offset != want[ps[i]]):
			e.t.Errorf("%s partition %d with requireStable: %+v, want offset %d", g, ps[i], o, want[ps[i]])
		}
	}
}

// sharing returns a group id other than g on g's __consumer_offsets
// partition, and one on another partition.
func (e *env) sharing(g string) (same, other string) {
	for i := 0; same == "" || other == ""; i++ {
		id := fmt.Sprintf("g%d", i)
		if e.c.PartitionFor(id) == e.c.PartitionFor(g) {
			if same == "" && id != g {
				same = id
			}
		} else if other == "" {
			other = id
		}
	}
	return same, other
}

func noErrs(t *testing.T, errs []error) {
	t.Helper()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("offset %d: %v", i, err)
		}
	}
}

func TestTxnOffsetsPendingUntilCommitMarker(t *testing.T) {
	e := newEnv(t, nil)
	noErrs(t, recv(t, e.c.CommitTxn(txnCommit("g", 7, at(0, 10), at(1, 20)))))
	e.expect("g", map[int32]int64{0: -1, 1: -1, 2: -1}, 0, 1)
	if d := e.c.Describe([]string{"g"})[0]; d.State != "Empty" || d.ProtocolType != "" {
		t.Fatalf("the commit should make a simple group: %+v", d)
	}
	// Another producer's marker, and this producer's marker on another
	// partition, change nothing.
	e.endTxn("g", 8, true)
	e.c.CompleteTxn((e.c.PartitionFor("g")+1)%5, 7, true)
	e.expect("g", map[int32]int64{0: -1, 1: -1, 2: -1}, 0, 1)

	e.endTxn("g", 7, true)
	e.expect("g", map[int32]int64{0: 10, 1: 20, 2: -1})
	// Listing every offset shows them too.
	if offs, err := e.c.FetchOffsets("g", nil, true); err != nil || len(offs) != 2 || offs[1].Offset != 20 || offs[1].Err != nil {
		t.Fatalf("%+v %v", offs, err)
	}
	// A second marker for the same producer (nothing pending) is harmless.
	e.endTxn("g", 7, false)
	e.expect("g", map[int32]int64{0: 10, 1: 20})
}

func TestTxnAbortDropsOffsets(t *testing.T) {
	e := newEnv(t, nil)
	noErrs(t, recv(t, e.c.Commit(commit("g", -1, "", at(0, 5)))))
	noErrs(t, recv(t, e.c.CommitTxn(txnCommit("g", 7, at(0, 10), at(1, 11)))))
	e.expect("g", map[int32]int64{0: 5, 1: -1}, 0, 1)
	e.endTxn("g", 7, false)
	e.expect("g", map[int32]int64{0: 5, 1: -1})
	// A commit marker after the abort finds nothing to apply.
	e.endTxn("g", 7, true)
	e.expect("g", map[int32]int64{0: 5, 1: -1})
}

func TestTxnMarkerCompletesEveryGroupOfThePartition(t *testing.T) {
	e := newEnv(t, nil)
	same, other := e.sharing("g")
	for _, g := range []string{"g", same, other} {
		noErrs(t, recv(t, e.c.CommitTxn(txnCommit(g, 7, at(0, 10)))))
	}
	noErrs(t, recv(t, e.c.CommitTxn(txnCommit("g", 8, at(1, 20)))))
	e.endTxn("g", 7, true)
	e.expect("g", map[int32]int64{0: 10, 1: -1}, 1)
	e.expect(same, map[int32]int64{0: 10})
	// The other partition's group waits for its own partition's marker.
	e.expect(other, map[int32]int64{0: -1}, 0)
	e.endTxn(other, 7, true)
	e.expect(other, map[int32]int64{0: 10})
}

func TestTxnLaterPlainCommitWins(t *testing.T) {
	e := newEnv(t, nil)
	// Partition 0: the transaction's offset is written first, then a plain
	// commit; the transaction commits last, but the plain commit is later
	// in the log and stays.
	noErrs(t, recv(t, e.c.CommitTxn(txnCommit("g", 7, at(0, 10), at(1, 10)))))
	noErrs(t, recv(t, e.c.Commit(commit("g", -1, "", at(0, 15)))))
	e.expect("g", map[int32]int64{0: 15, 1: -1}, 0, 1)
	// Partition 2: a plain commit before the transaction's offset is
	// replaced by it.
	noErrs(t, recv(t, e.c.Commit(commit("g", -1, "", at(2, 5)))))
	noErrs(t, recv(t, e.c.CommitTxn(txnCommit("g", 7, at(2, 30)))))
	e.endTxn("g", 7, true)
	want := map[int32]int64{0: 15, 1: 10, 2: 30}
	e.expect("g", want)
	// Replay follows the same rule.
	e.restart()
	e.expect("g", want)
}

func TestTxnCommitValidation(t *testing.T) {
	e := newEnv(t, nil)
	ids, gen := e.stableGroup("g", 2, 2)
	sids, sgen := e.stableStatic("s", 1)
	meta := strings.Repeat("m", 4097)
	withMember := func(g string, gen int32, member string, inst *string) group.TxnCommitRequest {
		r := txnCommit(g, 7, at(0, 1))
		r.Generation, r.MemberID, r.InstanceID = gen, member, inst
		return r
	}
	for _, tc := range []struct {
		name string
		req  group.TxnCommitRequest
		want error
	}{
		{"without member or generation (v0-2) to a group with members", txnCommit("g", 7, at(0, 1)), nil},
		{"member in its generation", withMember("g", gen, ids[1], nil), nil},
		{"stale generation", withMember("g", gen-1, ids[0], nil), group.ErrIllegalGeneration},
		{"member id without generation", withMember("g", -1, ids[0], nil), group.ErrIllegalGeneration},
		{"unknown member", withMember("g", gen, "nobody", nil), group.ErrUnknownMemberID},
		{"unknown group with a member", withMember("nope", 1, "x", nil), group.ErrUnknownMemberID},
		{"unknown group with a generation only", withMember("nope", 1, "", nil), group.ErrUnknownMemberID},
		{"static member", withMember("s", sgen, sids[0], ptr("ic0")), nil},
		{"fenced instance", withMember("s", sgen, "other", ptr("ic0")), group.ErrFencedInstanceID},
		{"unknown instance", withMember("s", sgen, sids[0], ptr("nobody")), group.ErrUnknownMemberID},
		{"invalid group", txnCommit("", 7, at(0, 1)), group.ErrInvalidGroupID},
		{"no producer", txnCommit("g", -1, at(0, 1)), group.ErrUnknownServerError},
	} {
		errs := recv(t, e.c.CommitTxn(tc.req))
		if len(errs) != 1 || !errors.Is(errs[0], tc.want) || (tc.want == nil) != (errs[0] == nil) {
			t.Errorf("%s: %v, want %v", tc.name, errs, tc.want)
		}
	}
	if d := e.c.Describe([]string{"nope"})[0]; d.State != "Dead" {
		t.Fatalf("a refused commit created the group: %+v", d)
	}
	// Metadata too large fails its offset only.
	big := group.CommitOffset{Topic: "t", Partition: 1, Offset: 3, LeaderEpoch: -1, Metadata: &meta}
	errs := recv(t, e.c.CommitTxn(txnCommit("g", 9, big, at(0, 4))))
	if errs[0] != group.ErrOffsetMetadataTooLarge || errs[1] != nil {
		t.Fatal(errs)
	}
	e.expect("g", map[int32]int64{0: -1, 1: -1}, 0)
}

func TestTxnCommitDuringRebalance(t *testing.T) {
	e := newEnv(t, nil)
	id, ch := e.firstJoin(joinReq("g", "c0"))
	e.clock.Advance(delay)
	r := recv(t, ch)
	if e.state("g") != "CompletingRebalance" {
		t.Fatal(e.state("g"))
	}
	// A plain commit waits for the assignment; a transactional one does
	// not (Kafka's validateOffsetCommit).
	if errs := recv(t, e.c.Commit(commit("g", r.Generation, id, at(0, 1)))); errs[0] != group.ErrRebalanceInProgress {
		t.Fatal(errs)
	}
	req := txnCommit("g", 7, at(0, 2))
	req.Generation, req.MemberID = r.Generation, id
	noErrs(t, recv(t, e.c.CommitTxn(req)))
}

func TestTxnCommitWriteFailure(t *testing.T) {
	e := newEnv(t, nil)
	if err := e.c.EnsureTopic(); err != nil {
		t.Fatal(err)
	}
	part := e.topic.Partition(int(e.c.PartitionFor("g")))
	fenced := errors.New("invalid producer epoch")
	for _, tc := range []struct {
		name          string
		fail, waitErr error
		want          []error
	}{
		{"refused append", fenced, nil, []error{group.ErrNotCoordinator, fenced}},
		{"too large", coordinator.ErrTooLarge, nil, []error{group.ErrInvalidCommitOffsetSize}},
		{"not durable", nil, fenced, []error{group.ErrNotCoordinator, fenced}},
	} {
		part.FailAppends(tc.fail)
		part.FailWaits(tc.waitErr)
		errs := recv(t, e.c.CommitTxn(txnCommit("g", 7, at(0, 1))))
		for _, want := range tc.want {
			if !errors.Is(errs[0], want) {
				t.Errorf("%s: %v, want %v", tc.name, errs[0], want)
			}
		}
		// Nothing is left pending.
		e.expect("g", map[int32]int64{0: -1})
	}
}

func TestTxnBatchFormat(t *testing.T) {
	e := newEnv(t, nil)
	recv(t, e.c.Commit(commit("g", -1, "", at(1, 1))))
	req := txnCommit("g", 42, group.CommitOffset{Topic: "t", Partition: 0, Offset: 9, LeaderEpoch: 2}, at(3, 11))
	req.ProducerEpoch = 3
	noErrs(t, recv(t, e.c.CommitTxn(req)))
	var txn, plain int
	for _, r := range offsetsRecords(t, e.topic) {
		switch {
		case r.offsetKey == nil:
			t.Fatalf("unexpected record %+v", r)
		case r.offsetKey.Partition == 1:
			plain++
			if r.attributes != 0 || r.producerID != -1 || r.epoch != -1 || r.baseSequence != -1 {
				t.Errorf("plain commit batch: %+v", r)
			}
		default:
			txn++
			if r.attributes != 0x10 || r.producerID != 42 || r.epoch != 3 || r.baseSequence != 0 {
				t.Errorf("transactional commit batch: %+v", r)
			}
			if v := r.offsetValue; v.Version != 3 || v.CommitTimestamp != e.clock.Now().UnixMilli() ||
				r.offsetKey.Partition == 0 && (v.Offset != 9 || v.LeaderEpoch != 2) {
				t.Errorf("transactional offset value %+v", v)
			}
		}
	}
	if txn != 2 || plain != 1 {
		t.Fatalf("%d transactional and %d plain records", txn, plain)
	}
}

func TestTxnCommitAnsweredWhenDurable(t *testing.T) {
	e := newEnv(t, nil)
	if err := e.c.EnsureTopic(); err != nil {
		t.Fatal(err)
	}
	part := e.topic.Partition(int(e.c.PartitionFor("g")))
	gate := make(chan struct{})
	part.HoldDurability(gate)
	ch := e.c.CommitTxn(txnCommit("g", 7, at(0, 10)))
	parked(t, ch)
	stable := e.c.AwaitStable("g")
	select {
	case <-stable:
		t.Fatal("stable with a commit in flight")
	default:
	}
	// Already pending: a RequireStable fetch must not read past it.
	e.expect("g", map[int32]int64{0: -1}, 0)
	close(gate)
	noErrs(t, recv(t, ch))
	recv(t, stable)
	e.expect("g", map[int32]int64{0: -1}, 0)
	e.endTxn("g", 7, true)
	e.expect("g", map[int32]int64{0: 10})
}

func TestTxnReplay(t *testing.T) {
	e := newEnv(t, nil)
	// Producer 1 commits, 2 aborts, 3 is still open at the restart, 4's
	// offset is overtaken by a later plain commit, and 5's is ended by a
	// tombstone (OffsetDelete) before its commit marker.
	noErrs(t, recv(t, e.c.CommitTxn(txnCommit("g", 1, at(0, 10)))))
	e.endTxn("g", 1, true)
	noErrs(t, recv(t, e.c.CommitTxn(txnCommit("g", 2, at(1, 20)))))
	e.endTxn("g", 2, false)
	noErrs(t, recv(t, e.c.Commit(commit("g", -1, "", at(2, 5)))))
	noErrs(t, recv(t, e.c.CommitTxn(txnCommit("g", 3, at(2, 30), at(3, 40)))))
	noErrs(t, recv(t, e.c.CommitTxn(txnCommit("g", 4, at(4, 50)))))
	noErrs(t, recv(t, e.c.Commit(commit("g", -1, "", at(4, 55)))))
	e.endTxn("g", 4, true)
	noErrs(t, recv(t, e.c.Commit(commit("g", -1, "", at(5, 1)))))
	noErrs(t, recv(t, e.c.CommitTxn(txnCommit("g", 5, at(5, 60)))))
	if res := recv(t, e.c.DeleteOffsets("g", []group.FetchTopic{{Topic: "t", Partitions: []int32{5}}})); res.Err != nil || res.Errs[0] != nil {
		t.Fatalf("%+v", res)
	}
	e.endTxn("g", 5, true)
	// A group with nothing but an open transaction's offset.
	same, _ := e.sharing("g")
	noErrs(t, recv(t, e.c.CommitTxn(txnCommit(same, 3, at(0, 70)))))

	want := map[int32]int64{0: 10, 1: -1, 2: 5, 3: -1, 4: 55, 5: -1}
	e.expect("g", want, 2, 3)
	e.restart()
	e.expect("g", want, 2, 3)
	e.expect(same, map[int32]int64{0: -1}, 0)
	if d := e.c.Describe([]string{same})[0]; d.State != "Empty" {
		t.Fatalf("%+v", d)
	}

	// The open transaction's marker arrives after the restart.
	e.endTxn("g", 3, true)
	want[2], want[3] = 30, 40
	e.expect("g", want)
	e.expect(same, map[int32]int64{0: 70})
	e.restart()
	e.expect("g", want)
	e.expect(same, map[int32]int64{0: 70})
}

func TestTxnReplayMarkerWithoutCompleteTxn(t *testing.T) {
	// The broker stops after the marker is written and before the
	// coordinator hears of it: replay applies the marker.
	e := newEnv(t, nil)
	noErrs(t, recv(t, e.c.CommitTxn(txnCommit("g", 1, at(0, 10)))))
	noErrs(t, recv(t, e.c.CommitTxn(txnCommit("g", 2, at(1, 20)))))
	e.writeMarker("g", 1, true)
	e.writeMarker("g", 2, false)
	e.restart()
	e.expect("g", map[int32]int64{0: 10, 1: -1})
}

func TestPendingTxnOffsetsDoNotExpire(t *testing.T) {
	e := newEnv(t, func(c *group.Config) { c.OffsetsRetention = time.Hour; c.OffsetsRetentionCheck = time.Minute })
	noErrs(t, recv(t, e.c.Commit(commit("s", -1, "", at(0, 1)))))
	noErrs(t, recv(t, e.c.CommitTxn(txnCommit("s", 9, at(0, 2)))))
	noErrs(t, recv(t, e.c.CommitTxn(txnCommit("only", 10, at(0, 3)))))
	e.clock.Advance(2 * time.Hour)
	e.expect("s", map[int32]int64{0: 1}, 0)
	for _, g := range []string{"s", "only"} {
		if d := e.c.Describe([]string{g})[0]; d.State != "Empty" {
			t.Fatalf("group with an open transaction deleted: %+v", d)
		}
	}
	e.endTxn("s", 9, false)
	e.endTxn("only", 10, false)
	e.clock.Advance(2 * time.Minute)
	for _, g := range []string{"s", "only"} {
		if d := e.c.Describe([]string{g})[0]; d.State != "Dead" {
			t.Fatalf("expired group kept: %+v", d)
		}
	}
}

func TestDeleteGroupDropsPendingTxnOffsets(t *testing.T) {
	e := newEnv(t, nil)
	noErrs(t, recv(t, e.c.Commit(commit("g", -1, "", at(0, 1)))))
	noErrs(t, recv(t, e.c.CommitTxn(txnCommit("g", 7, at(0, 2), at(1, 3)))))
	if err := recv(t, e.c.DeleteGroup("g")); err != nil {
		t.Fatal(err)
	}
	var tombstones []int32
	for _, r := range offsetsRecords(t, e.topic) {
		if r.tombstone && r.offsetKey != nil {
			tombstones = append(tombstones, r.offsetKey.Partition)
		}
	}
	if fmt.Sprint(tombstones) != "[0 1]" {
		t.Fatalf("offset tombstones %v", tombstones)
	}
	e.endTxn("g", 7, true)
	e.expect("g", map[int32]int64{0: -1, 1: -1})
	e.restart()
	if l := e.c.List(nil, nil); len(l) != 0 {
		t.Fatalf("deleted group back after restart: %+v", l)
	}
}

// TestTxnConcurrentProducers runs transactions of many producers at once
// against fetches (meant for -race).
func TestTxnConcurrentProducers(t *testing.T) {
	e := newEnv(t, nil)
	const producers = 16
	same, _ := e.sharing("g")
	var wg sync.WaitGroup
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			default:
				e.c.FetchOffsets("g", nil, true)
			}
		}
	}()
	for i := range producers {
		wg.Go(func() {
			pid := int64(100 + i)
			for round := range int64(5) {
				errs := recv(t, e.c.CommitTxn(txnCommit("g", pid, at(int32(i), round), at(int32(i)+producers, round))))
				errs = append(errs, recv(t, e.c.CommitTxn(txnCommit(same, pid, at(int32(i), round))))...)
				for _, err := range errs {
					if err != nil {
						t.Error(err)
					}
				}
				// Even rounds commit, odd ones abort.
				e.c.CompleteTxn(e.writeMarker("g", pid, round%2 == 0), pid, round%2 == 0)
			}
		})
	}
	wg.Wait()
	close(done)
	for _, g := range []string{"g", same} {
		offs, err := e.c.FetchOffsets(g, nil, true)
		if err != nil {
			t.Fatal(err)
		}
		if g == "g" && len(offs) != 2*producers || g == same && len(offs) != producers {
			t.Fatalf("%s: %d offsets", g, len(offs))
		}
		for _, o := range offs {
			if o.Offset != 4 || o.Err != nil {
				t.Errorf("%s: %+v, want the last committed round", g, o)
			}
		}
	}
}
