package raft

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	etcdraft "go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/strandlog/strand/internal/log/vfs"
)

// diskStorage keeps Raft's log durable: the write-ahead log of segments in
// <dir>/wal and the snapshot files in <dir>/snap (doc.go has the format and
// the recovery rule). Raft reads the log from ms, which holds what the files
// hold. Only the loop goroutine calls its methods; ms has its own lock, so
// tests may read it meanwhile.
type diskStorage struct {
	fs           vfs.FS
	walDir       string
	snapDir      string
	segmentBytes int64
	log          *slog.Logger

	ms *etcdraft.MemoryStorage
	hs *pb.HardState // the last hard state written

	seg      vfs.File // the newest segment, open for appending
	segSeq   uint64
	segOff   int64
	firstSeq uint64 // the oldest segment on disk
	// base and baseTerm are the snapshot the segments on disk follow: the
	// last recSegment header that moved it.
	base, baseTerm uint64
	snapIndex      uint64 // the newest snapshot file; 0 if none

	buf    []byte
	failed error // set on the first failed write: what is on disk is unknown
}

func segmentName(seq uint64) string { return fmt.Sprintf("%020d.wal", seq) }
func snapshotName(index uint64) string {
	return fmt.Sprintf("%020d.snap", index)
}

// parseNumbered returns the number of a file named <20 digits><ext>.
func parseNumbered(name, ext string) (uint64, bool) {
	digits, ok := strings.CutSuffix(name, ext)
	if !ok || len(digits) != 20 {
		return 0, false
	}
	n, err := strconv.ParseUint(digits, 10, 64)
	return n, err == nil
}

// openStorage recovers the storage in dir, creating it when absent. On
// damage it returns a *CorruptError naming the file and changes nothing.
func openStorage(fsys vfs.FS, dir string, segmentBytes int64, log *slog.Logger) (*diskStorage, error) {
	s := &diskStorage{
		fs:           fsys,
		walDir:       filepath.Join(dir, "wal"),
		snapDir:      filepath.Join(dir, "snap"),
		segmentBytes: segmentBytes,
		log:          log,
		ms:           etcdraft.NewMemoryStorage(),
	}
	for _, d := range []string{s.walDir, s.snapDir} {
		if err := fsys.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	snap, err := s.loadSnapshot()
	if err != nil {
		return nil, err
	}
	if err := s.replay(snap); err != nil {
		return nil, err
	}
	return s, nil
}

// loadSnapshot reads the newest snapshot file, checking its CRC and that it
// holds the index its name says. Older snapshot files are not read: the WAL
// does not go back far enough to use them. Leftover .tmp files of
// interrupted writes are removed.
func (s *diskStorage) loadSnapshot() (*pb.Snapshot, error) {
	des, err := s.fs.ReadDir(s.snapDir)
	if err != nil {
		return nil, err
	}
	var newest uint64
	found := false
	for _, de := range des {
		name := de.Name()
		if strings.HasSuffix(name, ".tmp") {
			if err := s.fs.Remove(filepath.Join(s.snapDir, name)); err != nil {
				return nil, err
			}
			continue
		}
		if !strings.HasSuffix(name, ".snap") {
			continue
		}
		idx, ok := parseNumbered(name, ".snap")
		if !ok {
			return nil, &CorruptError{File: filepath.Join(s.snapDir, name), Pos: -1, Reason: "not a snapshot file name"}
		}
		if !found || idx > newest {
			newest, found = idx, true
		}
	}
	if !found {
		return nil, nil
	}
	name := filepath.Join(s.snapDir, snapshotName(newest))
	b, err := vfs.ReadFile(s.fs, name)
	if err != nil {
		return nil, err
	}
	snap, reason := decodeSnapshotFile(b)
	if reason == "" && snap.GetMetadata().GetIndex() != newest {
		reason = fmt.Sprintf("holds index %d", snap.GetMetadata().GetIndex())
	}
	if reason != "" {
		return nil, &CorruptError{File: name, Pos: -1, Reason: reason}
	}
	s.snapIndex = newest
	return snap, nil
}

// A snapshot file is the CRC-32C of the rest (uint32 big-endian), then the
// marshalled raftpb.Snapshot: metadata (index, term, conf state) and data.
func encodeSnapshotFile(snap *pb.Snapshot) ([]byte, error) {
	body, err := proto.Marshal(snap)
	if err != nil {
		return nil, err
	}
	b := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(body)), crc32.Checksum(body, castagnoli))
	return append(b, body...), nil
}

func decodeSnapshotFile(b []byte) (*pb.Snapshot, string) {
	if len(b) < 4 {
		return nil, "file too short"
	}
	if crc32.Checksum(b[4:], castagnoli) != binary.BigEndian.Uint32(b) {
		return nil, "snapshot CRC mismatch"
	}
	snap := &pb.Snapshot{}
	if err := proto.Unmarshal(b[4:], snap); err != nil {
		return nil, "snapshot does not decode: " + err.Error()
	}
	if etcdraft.IsEmptySnap(snap) {
		return nil, "snapshot has index 0"
	}
	return pb.EnsureSnapshot(snap), ""
}

// walState is the log as replayed from the segments: the snapshot it
// follows, the entries after it, and the last hard state.
type walState struct {
	base, baseTerm uint64
	ents           []*pb.Entry // ents[i] has index base+1+i
	hs             *pb.HardState
}

func (w *walState) last() uint64 { return w.base + uint64(len(w.ents)) }

func (w *walState) term(i uint64) (uint64, bool) {
	switch {
	case i == w.base:
		return w.baseTerm, true
	case i > w.base && i <= w.last():
		return w.ents[i-w.base-1].GetTerm(), true
	}
	return 0, false
}

// rebase moves the log's start to the snapshot (index, term). The entries
// after index are kept only when the entry at index is that snapshot's
// (same term, so by Raft's log matching the same history); otherwise they
// belong to a history the snapshot replaced, and the leader sends the
// right ones again.
func (w *walState) rebase(index, term uint64) {
	if t, ok := w.term(index); ok && t == term {
		w.ents = slices.Clone(w.ents[index-w.base:])
	} else {
		w.ents = nil
	}
	w.base, w.baseTerm = index, term
}

// replay reads every segment in order and loads the log into ms.
func (s *diskStorage) replay(snap *pb.Snapshot) error {
	seqs, err := s.listSegments()
	if err != nil {
		return err
	}
	var w walState
	end, torn := 0, false
	for i := 0; i < len(seqs); i++ {
		seq := seqs[i]
		name := filepath.Join(s.walDir, segmentName(seq))
		b, err := vfs.ReadFile(s.fs, name)
		if err != nil {
			return err
		}
		last := i == len(seqs)-1
		recs, segEnd, segTorn, err := scanSegment(b, name, last)
		if err != nil {
			return err
		}
		if len(recs) == 0 && last {
			if i == 0 && snap != nil {
				return &CorruptError{File: name, Pos: 0, Reason: fmt.Sprintf("the only WAL segment has no valid header, but snapshot %d exists", snap.GetMetadata().GetIndex())}
			}
			// A segment whose header never became durable: a roll or cut
			// interrupted before its first sync. The segments before it
			// are whole (they are synced before the next is created).
			s.log.Warn("removing a segment with no valid header, left by an interrupted roll", "file", name)
			if err := s.fs.Remove(name); err != nil {
				return err
			}
			if err := s.fs.SyncDir(s.walDir); err != nil {
				return err
			}
			seqs = seqs[:i]
			break
		}
		if err := w.apply(recs, name, seq); err != nil {
			return err
		}
		end, torn = segEnd, segTorn
		if torn {
			s.log.Warn("cutting a torn record at the end of the WAL", "file", name, "pos", segEnd, "bytes", len(b)-segEnd)
		}
	}

	var snapIndex, snapTerm uint64
	if snap != nil {
		snapIndex, snapTerm = snap.GetMetadata().GetIndex(), snap.GetMetadata().GetTerm()
	}
	if len(seqs) == 0 && snap != nil {
		return &CorruptError{File: s.walDir, Pos: -1, Reason: fmt.Sprintf("no WAL segment, but snapshot %d exists", snapIndex)}
	}
	if w.base > snapIndex {
		return &CorruptError{File: filepath.Join(s.snapDir, snapshotName(w.base)), Pos: -1,
			Reason: fmt.Sprintf("missing: the WAL follows snapshot %d, the newest snapshot file is %d", w.base, snapIndex)}
	}
	if snapIndex > w.base {
		w.rebase(snapIndex, snapTerm)
	} else if snap != nil && w.baseTerm != snapTerm {
		return &CorruptError{File: filepath.Join(s.snapDir, snapshotName(snapIndex)), Pos: -1,
			Reason: fmt.Sprintf("term %d, but the WAL follows term %d at that index", snapTerm, w.baseTerm)}
	}
	if w.hs != nil {
		// A snapshot holds only committed entries; the hard state written
		// with it may not have been durable when the snapshot file was.
		if w.hs.GetCommit() < snapIndex {
			w.hs.Commit = new(snapIndex)
		}
		if w.hs.GetCommit() > w.last() {
			return &CorruptError{File: filepath.Join(s.walDir, segmentName(seqs[len(seqs)-1])), Pos: -1,
				Reason: fmt.Sprintf("hard state commits index %d beyond the last entry %d", w.hs.GetCommit(), w.last())}
		}
	}

	if snap != nil {
		if err := s.ms.ApplySnapshot(snap); err != nil {
			return err
		}
	}
	if w.hs != nil {
		if err := s.ms.SetHardState(w.hs); err != nil {
			return err
		}
		s.hs = w.hs
	}
	if err := s.ms.Append(w.ents); err != nil {
		return err
	}
	s.base, s.baseTerm = w.base, w.baseTerm

	if len(seqs) == 0 {
		return s.createFirstSegment()
	}
	s.firstSeq, s.segSeq = seqs[0], seqs[len(seqs)-1]
	name := filepath.Join(s.walDir, segmentName(s.segSeq))
	f, err := s.fs.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	if torn {
		if err := f.Truncate(int64(end)); err == nil {
			err = f.Sync()
		}
		if err != nil {
			f.Close()
			return err
		}
	}
	s.seg, s.segOff = f, int64(end)
	return nil
}

// apply replays one segment's records into w.
func (w *walState) apply(recs []walRecord, name string, seq uint64) error {
	bad := func(r walRecord, format string, args ...any) error {
		return &CorruptError{File: name, Pos: r.pos, Reason: fmt.Sprintf(format, args...)}
	}
	for i, r := range recs {
		if (i == 0) != (r.typ == recSegment) {
			return bad(r, "the segment header must be the first record and only the first")
		}
		switch r.typ {
		case recSegment:
			h, ok := decodeSegmentHeader(r.payload)
			switch {
			case !ok:
				return bad(r, "segment header of %d bytes", len(r.payload))
			case h.Seq != seq:
				return bad(r, "header says segment %d", h.Seq)
			case h.Index < w.base:
				return bad(r, "segment follows snapshot %d, an earlier segment follows %d", h.Index, w.base)
			case h.Index > w.base:
				// A cut after a snapshot: the segment repeats every entry
				// after it. Entries are kept only where they agree.
				w.rebase(h.Index, h.Term)
			case h.Term != w.baseTerm:
				return bad(r, "segment follows snapshot term %d, an earlier segment term %d", h.Term, w.baseTerm)
			}
		case recEntry:
			e := &pb.Entry{}
			if err := proto.Unmarshal(r.payload, e); err != nil {
				return bad(r, "entry does not decode: %v", err)
			}
			idx := e.GetIndex()
			if idx <= w.base || idx > w.last()+1 {
				return bad(r, "entry %d does not follow the log (%d to %d)", idx, w.base+1, w.last())
			}
			// Writing entry idx replaces it and everything after it.
			w.ents = append(w.ents[:idx-w.base-1], e)
		case recHardState:
			hs := &pb.HardState{}
			if err := proto.Unmarshal(r.payload, hs); err != nil {
				return bad(r, "hard state does not decode: %v", err)
			}
			w.hs = hs
		}
	}
	return nil
}

// listSegments returns the segments' sequence numbers in order, which must
// have no gap.
func (s *diskStorage) listSegments() ([]uint64, error) {
	des, err := s.fs.ReadDir(s.walDir)
	if err != nil {
		return nil, err
	}
	var seqs []uint64
	for _, de := range des {
		if !strings.HasSuffix(de.Name(), ".wal") {
			continue
		}
		seq, ok := parseNumbered(de.Name(), ".wal")
		if !ok {
			return nil, &CorruptError{File: filepath.Join(s.walDir, de.Name()), Pos: -1, Reason: "not a WAL segment name"}
		}
		seqs = append(seqs, seq)
	}
	slices.Sort(seqs)
	for i := 1; i < len(seqs); i++ {
		if seqs[i] != seqs[i-1]+1 {
			return nil, &CorruptError{File: filepath.Join(s.walDir, segmentName(seqs[i-1]+1)), Pos: -1,
				Reason: fmt.Sprintf("segment missing between %s and %s", segmentName(seqs[i-1]), segmentName(seqs[i]))}
		}
	}
	return seqs, nil
}

// createFirstSegment starts the WAL of an empty directory.
func (s *diskStorage) createFirstSegment() error {
	f, n, err := s.writeSegment(0, segmentHeader{}, nil, nil)
	if err != nil {
		return err
	}
	s.seg, s.segSeq, s.segOff, s.firstSeq = f, 0, n, 0
	return nil
}

// writeSegment creates segment seq holding its header, ents and hs, and
// makes it durable: file synced, then the directory, so the segment cannot
// vanish after records in it were acknowledged.
func (s *diskStorage) writeSegment(seq uint64, h segmentHeader, ents []*pb.Entry, hs *pb.HardState) (vfs.File, int64, error) {
	h.Seq = seq
	buf := appendRecord(nil, recSegment, h.encode())
	buf, err := appendLog(buf, ents, hs)
	if err != nil {
		return nil, 0, err
	}
	name := filepath.Join(s.walDir, segmentName(seq))
	f, err := s.fs.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, 0, err
	}
	if _, err = f.WriteAt(buf, 0); err == nil {
		err = f.Sync()
	}
	if err == nil {
		err = s.fs.SyncDir(s.walDir)
	}
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, int64(len(buf)), nil
}

// appendLog appends records for ents and then hs (if not empty): a hard
// state is written after the entries it may commit.
func appendLog(buf []byte, ents []*pb.Entry, hs *pb.HardState) ([]byte, error) {
	for _, e := range ents {
		b, err := proto.Marshal(e)
		if err != nil {
			return nil, err
		}
		buf = appendRecord(buf, recEntry, b)
	}
	if !etcdraft.IsEmptyHardState(hs) {
		b, err := proto.Marshal(hs)
		if err != nil {
			return nil, err
		}
		buf = appendRecord(buf, recHardState, b)
	}
	return buf, nil
}

func (s *diskStorage) fail(err error) error {
	if s.failed == nil {
		s.failed = fmt.Errorf("cluster/raft: storage failed, restart the node: %w", err)
	}
	return s.failed
}

// save makes one Ready's hard state, entries and snapshot durable (synced
// when mustSync), then hands them to ms. It must return before the Ready's
// messages are sent.
func (s *diskStorage) save(hs *pb.HardState, ents []*pb.Entry, snap *pb.Snapshot, mustSync bool) error {
	if s.failed != nil {
		return s.failed
	}
	if !etcdraft.IsEmptySnap(snap) {
		return s.installSnapshot(snap, hs, ents)
	}
	if len(ents) == 0 && etcdraft.IsEmptyHardState(hs) {
		return nil
	}
	buf, err := appendLog(s.buf[:0], ents, hs)
	if err != nil {
		return err
	}
	s.buf = buf
	if _, err := s.seg.WriteAt(buf, s.segOff); err != nil {
		return s.fail(err)
	}
	s.segOff += int64(len(buf))
	if mustSync {
		if err := s.seg.Sync(); err != nil {
			return s.fail(err)
		}
	}
	if err := s.ms.Append(ents); err != nil {
		return err
	}
	if !etcdraft.IsEmptyHardState(hs) {
		if err := s.ms.SetHardState(hs); err != nil {
			return err
		}
		s.hs = hs
	}
	if s.segOff >= s.segmentBytes {
		return s.cut(s.base, s.baseTerm, nil, nil)
	}
	return nil
}

// installSnapshot stores a snapshot received from the leader, which replaces
// the whole log: snapshot file first, then a new segment following it with
// hs and ents, then the old files go.
func (s *diskStorage) installSnapshot(snap *pb.Snapshot, hs *pb.HardState, ents []*pb.Entry) error {
	if err := s.writeSnapshotFile(snap); err != nil {
		return s.fail(err)
	}
	if etcdraft.IsEmptyHardState(hs) {
		hs = s.hs
	}
	meta := snap.GetMetadata()
	if err := s.cut(meta.GetIndex(), meta.GetTerm(), ents, hs); err != nil {
		return s.fail(err)
	}
	if err := s.ms.ApplySnapshot(snap); err != nil {
		return err
	}
	if !etcdraft.IsEmptyHardState(hs) {
		if err := s.ms.SetHardState(hs); err != nil {
			return err
		}
		s.hs = hs
	}
	if err := s.ms.Append(ents); err != nil {
		return err
	}
	return s.removeOldSnapshots()
}

// createSnapshot snapshots the state as of index (applied, so in the log),
// then compacts: snapshot file, a new segment holding the entries after
// index and the hard state, removal of the old segments and snapshot files,
// and ms keeps the entries after compactTo for followers slightly behind.
func (s *diskStorage) createSnapshot(index uint64, cs *pb.ConfState, data []byte, compactTo uint64) error {
	if s.failed != nil {
		return s.failed
	}
	snap, err := s.ms.CreateSnapshot(index, cs, data)
	if err != nil {
		return err
	}
	if err := s.writeSnapshotFile(snap); err != nil {
		return s.fail(err)
	}
	last, _ := s.ms.LastIndex()
	var ents []*pb.Entry
	if last > index {
		if ents, err = s.ms.Entries(index+1, last+1, math.MaxUint64); err != nil {
			return err
		}
	}
	if err := s.cut(index, snap.GetMetadata().GetTerm(), ents, s.hs); err != nil {
		return s.fail(err)
	}
	if err := s.removeOldSnapshots(); err != nil {
		return err
	}
	if first, _ := s.ms.FirstIndex(); compactTo >= first {
		if err := s.ms.Compact(compactTo); err != nil {
			return err
		}
	}
	return nil
}

func (s *diskStorage) writeSnapshotFile(snap *pb.Snapshot) error {
	b, err := encodeSnapshotFile(snap)
	if err != nil {
		return err
	}
	idx := snap.GetMetadata().GetIndex()
	if err := vfs.WriteFileAtomic(s.fs, filepath.Join(s.snapDir, snapshotName(idx)), b); err != nil {
		return err
	}
	s.snapIndex = idx
	return nil
}

// cut seals the current segment and starts the next one, following the
// snapshot (index, term). When index moved (a snapshot), the new segment
// repeats ents (every entry after index) and hs, so the older segments are
// no longer needed and are removed, oldest first. When it did not (the
// segment reached SegmentBytes), nothing is repeated or removed.
func (s *diskStorage) cut(index, term uint64, ents []*pb.Entry, hs *pb.HardState) error {
	// Only the newest segment may hold unsynced records.
	if err := s.seg.Sync(); err != nil {
		return err
	}
	seq := s.segSeq + 1
	f, n, err := s.writeSegment(seq, segmentHeader{Index: index, Term: term}, ents, hs)
	if err != nil {
		return err
	}
	old := s.seg
	s.seg, s.segSeq, s.segOff = f, seq, n
	if err := old.Close(); err != nil {
		return err
	}
	if index == s.base {
		return nil
	}
	s.base, s.baseTerm = index, term
	for ; s.firstSeq < seq; s.firstSeq++ {
		if err := s.fs.Remove(filepath.Join(s.walDir, segmentName(s.firstSeq))); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return s.fs.SyncDir(s.walDir)
}

// removeOldSnapshots removes the snapshot files older than the newest; the
// WAL no longer reaches back to them.
func (s *diskStorage) removeOldSnapshots() error {
	des, err := s.fs.ReadDir(s.snapDir)
	if err != nil {
		return err
	}
	removed := false
	for _, de := range des {
		if idx, ok := parseNumbered(de.Name(), ".snap"); ok && idx < s.snapIndex {
			if err := s.fs.Remove(filepath.Join(s.snapDir, de.Name())); err != nil {
				return err
			}
			removed = true
		}
	}
	if removed {
		return s.fs.SyncDir(s.snapDir)
	}
	return nil
}

// close syncs and closes the open segment.
func (s *diskStorage) close() error {
	if s.seg == nil {
		return nil
	}
	err := s.seg.Sync()
	if cerr := s.seg.Close(); err == nil {
		err = cerr
	}
	s.seg = nil
	if s.failed != nil {
		return nil // already reported by the loop
	}
	return err
}

// empty reports whether nothing was ever stored: no snapshot, no entry, no
// hard state. Only an empty storage may be bootstrapped.
func (s *diskStorage) empty() bool {
	last, _ := s.ms.LastIndex()
	return last == 0 && s.snapIndex == 0 && etcdraft.IsEmptyHardState(s.hs)
}
