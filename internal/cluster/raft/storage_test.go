package raft

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/strandlog/strand/internal/log/vfs"
)

func TestRecordRoundTrip(t *testing.T) {
	var b []byte
	payloads := [][]byte{nil, []byte("x"), make([]byte, 1000)}
	for i, p := range payloads {
		b = appendRecord(b, byte(i%3+1), p)
	}
	off := 0
	for i, p := range payloads {
		typ, payload, next, reason := parseRecord(b, off)
		if reason != "" || typ != byte(i%3+1) || string(payload) != string(p) {
			t.Fatalf("record %d: type %d, %d bytes, %q", i, typ, len(payload), reason)
		}
		off = next
	}
	if off != len(b) {
		t.Fatalf("records end at %d of %d", off, len(b))
	}
	// Every single flipped bit is caught, wherever it is.
	for i := range len(b) * 8 {
		c := slices.Clone(b)
		c[i/8] ^= 1 << (i % 8)
		recs, _, _, err := scanSegment(c, "seg", false)
		if err == nil && len(recs) == len(payloads) {
			t.Fatalf("bit %d flipped unnoticed", i)
		}
	}
}

func TestEncodingRoundTrip(t *testing.T) {
	sd := snapshotData{Members: map[uint64]string{1: "a:1", 7: "", 1 << 60: "host:9093"}, State: []byte("state")}
	got, err := decodeSnapshotData(sd.encode())
	if err != nil || fmt.Sprint(got.Members) != fmt.Sprint(sd.Members) || string(got.State) != "state" {
		t.Fatalf("snapshot data: %+v, %v", got, err)
	}
	if _, err := decodeSnapshotData(sd.encode()[:5]); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("cut snapshot data: %v", err)
	}
	cc := changeContext{Addr: "h:1", Proposer: 3, Req: 1 << 62}
	if got, err := decodeChangeContext(cc.encode()); err != nil || got != cc {
		t.Fatalf("change context: %+v, %v", got, err)
	}
	p, r, d, err := decodeProposal(encodeProposal(5, 9, []byte("d")))
	if err != nil || p != 5 || r != 9 || string(d) != "d" {
		t.Fatalf("proposal: %d %d %q %v", p, r, d, err)
	}
}

// storedNode runs a single voter on a fresh MemFS, proposes count entries,
// closes it cleanly and returns its file system and final state.
func storedNode(t *testing.T, count int, tweak func(*Config)) (*vfs.MemFS, []smEntry) {
	t.Helper()
	c := newCluster(t, 1, 1, tweak)
	c.waitLeader(10 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c.proposeMany(ctx, "", []uint64{1}, count)
	state := c.waitConverged(5 * time.Second)
	c.stop(1)
	return c.nodes[1].fs, state
}

// restartOn starts a single voter on fsys and returns its state once it
// replayed its committed log, or Start's error.
func restartOn(t *testing.T, fsys vfs.FS, tweak func(*Config)) ([]smEntry, *Node, error) {
	t.Helper()
	sm := &testSM{}
	cfg := Config{
		NodeID: 1, Voters: []uint64{1}, FS: fsys, Dir: "/raft", SM: sm,
		Transport: NewMemNetwork(1).Endpoint(1), TickInterval: 10 * time.Millisecond,
		SnapshotEntries: 1 << 40, Logger: testLogger,
	}
	if tweak != nil {
		tweak(&cfg)
	}
	n, err := Start(cfg)
	if err != nil {
		return nil, nil, err
	}
	t.Cleanup(func() { n.Close() })
	deadline := time.Now().Add(5 * time.Second)
	for {
		st := n.Status()
		if st.Leader == 1 && st.Applied == st.Commit {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("restarted node: %+v", st)
		}
		time.Sleep(5 * time.Millisecond)
	}
	entries, _, _, violations := sm.state()
	if len(violations) > 0 {
		t.Fatalf("restarted node: %v", violations)
	}
	return entries, n, nil
}

func segments(t *testing.T, fsys vfs.FS) []string {
	t.Helper()
	des, err := fsys.ReadDir("/raft/wal")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, de := range des {
		names = append(names, filepath.Join("/raft/wal", de.Name()))
	}
	return names
}

func rewrite(t *testing.T, fsys vfs.FS, name string, change func([]byte) []byte) {
	t.Helper()
	b, err := vfs.ReadFile(fsys, name)
	if err != nil {
		t.Fatal(err)
	}
	b = change(b)
	f, err := fsys.OpenFile(name, os.O_RDWR|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(b, 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

// recordPositions returns where each record of a segment starts.
func recordPositions(t *testing.T, fsys vfs.FS, name string) []int {
	t.Helper()
	b, err := vfs.ReadFile(fsys, name)
	if err != nil {
		t.Fatal(err)
	}
	recs, _, _, err := scanSegment(b, name, false)
	if err != nil {
		t.Fatal(err)
	}
	var pos []int
	for _, r := range recs {
		pos = append(pos, int(r.pos))
	}
	return pos
}

// TestDamagedStorage: damage to records that were durable makes Start fail
// with an error naming the file; a torn last record is cut and Start
// succeeds with the state before it.
func TestDamagedStorage(t *testing.T) {
	manySegments := func(cfg *Config) { cfg.SegmentBytes = 400 }
	snapshots := func(cfg *Config) { cfg.SnapshotEntries = 10 }
	for _, tc := range []struct {
		name  string
		tweak func(*Config)
		// damage changes fsys and returns the file Start must name; ""
		// means Start must succeed.
		damage func(t *testing.T, fsys *vfs.MemFS) string
	}{
		{"byte flipped mid-segment", nil, func(t *testing.T, fsys *vfs.MemFS) string {
			seg := segments(t, fsys)[0]
			rewrite(t, fsys, seg, func(b []byte) []byte { b[len(b)/2] ^= 0x40; return b })
			return seg
		}},
		{"length of a middle record damaged", nil, func(t *testing.T, fsys *vfs.MemFS) string {
			seg := segments(t, fsys)[0]
			pos := recordPositions(t, fsys, seg)
			rewrite(t, fsys, seg, func(b []byte) []byte { b[pos[len(pos)/2]+1] ^= 0x7f; return b })
			return seg
		}},
		{"last record cut short", nil, func(t *testing.T, fsys *vfs.MemFS) string {
			seg := segments(t, fsys)[0]
			rewrite(t, fsys, seg, func(b []byte) []byte { return b[:len(b)-3] })
			return ""
		}},
		{"last record fails its CRC", nil, func(t *testing.T, fsys *vfs.MemFS) string {
			seg := segments(t, fsys)[0]
			rewrite(t, fsys, seg, func(b []byte) []byte { b[len(b)-1] ^= 1; return b })
			return ""
		}},
		{"byte flipped in a sealed segment", manySegments, func(t *testing.T, fsys *vfs.MemFS) string {
			segs := segments(t, fsys)
			if len(segs) < 3 {
				t.Fatalf("only %d segments", len(segs))
			}
			rewrite(t, fsys, segs[1], func(b []byte) []byte { b[len(b)-2] ^= 1; return b })
			return segs[1]
		}},
		{"segment missing", manySegments, func(t *testing.T, fsys *vfs.MemFS) string {
			segs := segments(t, fsys)
			if err := fsys.Remove(segs[1]); err != nil {
				t.Fatal(err)
			}
			return segs[1]
		}},
		{"snapshot fails its CRC", snapshots, func(t *testing.T, fsys *vfs.MemFS) string {
			name := newestSnapshot(t, fsys)
			rewrite(t, fsys, name, func(b []byte) []byte { b[len(b)/2] ^= 1; return b })
			return name
		}},
		{"snapshot missing", snapshots, func(t *testing.T, fsys *vfs.MemFS) string {
			name := newestSnapshot(t, fsys)
			if err := fsys.Remove(name); err != nil {
				t.Fatal(err)
			}
			return name
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys, want := storedNode(t, 30, tc.tweak)
			lastSeg := segments(t, fsys)[len(segments(t, fsys))-1]
			pos := recordPositions(t, fsys, lastSeg)
			file := tc.damage(t, fsys)
			if file == "" {
				// The torn record is cut: recovery truncates the segment
				// where the last record began.
				s, err := openStorage(fsys.CrashClone(vfs.CrashOptions{}), "/raft", 1<<30, testLogger)
				if err != nil {
					t.Fatalf("open: %v", err)
				}
				b, _ := vfs.ReadFile(s.fs, lastSeg)
				if cut := pos[len(pos)-1]; s.segOff != int64(cut) || len(b) != cut {
					t.Errorf("segment cut at %d (file %d bytes), want %d", s.segOff, len(b), cut)
				}
				s.close()
			}
			got, _, err := restartOn(t, fsys, tc.tweak)
			if file != "" {
				var ce *CorruptError
				if !errors.As(err, &ce) || ce.File != file || !strings.Contains(err.Error(), file) {
					t.Fatalf("Start: %v, want a *CorruptError naming %s", err, file)
				}
				return
			}
			if err != nil {
				t.Fatalf("Start: %v", err)
			}
			// The last record of a cleanly closed node is a hard state, so
			// the state is whole.
			if !slices.Equal(got, want) {
				t.Errorf("state after recovery: %d entries, want %d", len(got), len(want))
			}
		})
	}
}

func newestSnapshot(t *testing.T, fsys vfs.FS) string {
	t.Helper()
	des, err := fsys.ReadDir("/raft/snap")
	if err != nil || len(des) == 0 {
		t.Fatalf("no snapshot: %v", err)
	}
	return filepath.Join("/raft/snap", des[len(des)-1].Name())
}

// TestTornTailEveryOffset cuts the last segment at every byte and recovers
// the storage: it always opens, and its log is a prefix of the whole one.
func TestTornTailEveryOffset(t *testing.T) {
	fsys, _ := storedNode(t, 8, nil)
	seg := segments(t, fsys)[0]
	whole, err := openStorage(fsys, "/raft", 1<<30, testLogger)
	if err != nil {
		t.Fatal(err)
	}
	wantLast, _ := whole.ms.LastIndex()
	want, _ := whole.ms.Entries(1, wantLast+1, math.MaxUint64)
	whole.close()
	b, _ := vfs.ReadFile(fsys, seg)
	for size := range len(b) {
		clone := fsys.CrashClone(vfs.CrashOptions{})
		rewrite(t, clone, seg, func(b []byte) []byte { return b[:size] })
		s, err := openStorage(clone, "/raft", 1<<30, testLogger)
		if err != nil {
			t.Fatalf("cut at %d: %v", size, err)
		}
		last, _ := s.ms.LastIndex()
		got, _ := s.ms.Entries(1, last+1, math.MaxUint64)
		if len(got) > len(want) || !slices.EqualFunc(got, want[:len(got)], func(a, b *pb.Entry) bool { return proto.Equal(a, b) }) {
			t.Fatalf("cut at %d: log of %d entries is not a prefix of the whole %d", size, len(got), len(want))
		}
		if hs, _, _ := s.ms.InitialState(); hs.GetCommit() > last {
			t.Fatalf("cut at %d: commit %d past last %d", size, hs.GetCommit(), last)
		}
		s.close()
	}
}

// TestStorageFailureStopsNode: after a failed fsync the node stops (what is
// on disk is unknown) instead of sending anything that depends on it;
// proposals fail with ErrStopped and Close reports the cause.
func TestStorageFailureStopsNode(t *testing.T) {
	injected := errors.New("injected sync failure")
	var failing atomic.Bool
	mem := vfs.NewMem()
	errFS := vfs.NewErrorFS(mem, func(op vfs.Op, name string) error {
		if failing.Load() && op == vfs.OpSync {
			return injected
		}
		return nil
	})
	sm := &testSM{}
	n, err := Start(Config{
		NodeID: 1, Voters: []uint64{1}, FS: errFS, Dir: "/raft", SM: sm,
		Transport: NewMemNetwork(1).Endpoint(1), TickInterval: 10 * time.Millisecond, Logger: testLogger,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := n.Propose(ctx, []byte("ok")); err != nil {
		t.Fatal(err)
	}
	failing.Store(true)
	if _, err := n.Propose(ctx, []byte("lost")); !errors.Is(err, ErrStopped) {
		t.Fatalf("Propose after a failed sync: %v, want ErrStopped", err)
	}
	if entries, _, _, _ := sm.state(); len(entries) != 1 {
		t.Errorf("applied %d entries, want 1: an entry applied without being durable", len(entries))
	}
	if err := n.Close(); !errors.Is(err, injected) {
		t.Errorf("Close: %v, want the injected error", err)
	}
	if _, err := n.Propose(ctx, []byte("after")); !errors.Is(err, ErrStopped) {
		t.Errorf("Propose after Close: %v", err)
	}
}
