package log

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/strandlog/strand/internal/lockrank"
	"github.com/strandlog/strand/internal/log/vfs"
	"github.com/strandlog/strand/internal/model"
)

// The journal makes a sync round of many logs one sequential write and one
// fsync, instead of an fsync of every log's active segment or a sync of the
// whole file system. A round of a thousand logs dirties a thousand tail
// blocks and inodes; syncing them costs tens of milliseconds on an SSD,
// while appending the same bytes to one file and syncing it costs about
// one fsync. The segments are synced later, in the background, before the
// journal file holding their bytes is removed.
//
// Invariants:
//   - A log's offsets below Log.synced are durable: in its segment files
//     (below Log.fileSynced, the recovery point in its checkpoint) or in a
//     journal record written with a sequence number at or above the log's
//     fence.
//   - A record holds whole batches of one log, as they lie in its active
//     segment from the first byte not known durable to the segment's end
//     when the round read it. Records of one log follow its appends: a
//     record starts at or below where durable data ended.
//   - Every round takes its sequence number before it reads any log. A
//     truncation syncs the log's files and sets its fence to the next
//     sequence number, durably in its checkpoint, before it lets go of the
//     log: records taken before it can hold truncated data and are never
//     replayed; records taken after it hold only what followed it. A new
//     log gets a fence too, so a deleted log's records never reach the log
//     that takes its directory.
//   - Sequence numbers only grow, across restarts too: the newest journal
//     file is never removed, and its name and its records' numbers tell
//     the next start where numbering goes on.
//
// A round, in order (fileSyncer.runRound calls commit):
//  1. take the sequence number;
//  2. read each log's bytes past its durable position (Log.journalSpan)
//     into one buffer, a record per log (from the log's tail in memory,
//     tail.go, when its last round was journaled too);
//  3. append the buffer to the current file, and fsync it; once this round
//     holds the file, the next may take its number and read its logs, so
//     rounds write in the order of their numbers;
//  4. a log truncated since step 1 (its fence passed the number) fsyncs
//     its own segment instead; the others are durable up to what they
//     asked for.
//
// A file over journalFileBytes is sealed and a new one started; the sealed
// file's logs write their tails and are synced in the background (one
// syncfs, or an fsync each if that fails) and only then is the file
// removed. A log whose sync fails
// keeps the file, and is failed.
//
// What a crash leaves, and recovery (openJournal, at the manager's start,
// before any log is served):
//   - Each file is read to its first bad record: a torn tail (a round cut
//     short, never acknowledged).
//   - Each log named by a record is opened and recovered as always (its
//     torn tail cut), and then the records at or above its fence are laid
//     over it in order, a later record replacing what an earlier one held
//     from its first offset on. Batches past the log's end are appended as
//     they were; a batch that overlaps the end means the file kept other
//     bytes than the journal, which wins (the log is cut to the batch
//     first); a batch starting past the end means durable data was lost,
//     and the log is reported corrupt.
//   - What was appended is synced, a new file is started, and the old
//     files are removed. After a clean shutdown the journal holds no
//     records, and start-up opens nothing.
//
// Rejected: the journal as the only copy (segments written from it later,
// as a database writes its tables from its log). It writes each byte once
// rather than twice, but fetches would wait for the copy or read the
// journal, and sendfile from the segments is what makes consume cheap.
// Also rejected: journaling every round. Rounds of a few logs fsync their
// segments at about the cost of one journal write, and writing twice
// halves the disk bandwidth left to large batches.

// journalDirName is the journal's directory, beside the partitions'.
const journalDirName = "journal"

const journalSuffix = ".journal"

// journalFileBytes is how large a journal file grows before it is sealed
// and a new one started.
var journalFileBytes int64 = 128 << 20

// A record: length of the body (uint32), CRC-32C of the body (uint32),
// then the body: the round's sequence number (int64), the length of the
// log's directory name (uint16), the name, and the batches.
const journalHeaderLen = 8

var crc32c = crc32.MakeTable(crc32.Castagnoli)

type journal struct {
	fs     vfs.FS
	dir    string
	logger *slog.Logger

	// next is the sequence number the next round takes.
	next atomic.Int64
	// broken is set when a journal write fails: rounds sync the logs
	// themselves from then on.
	broken atomic.Bool

	// tails bounds the memory of the logs' tails (tail.go).
	tails tailBudget

	mu   lockrank.Mutex[lockrank.LogSync] // serialises writes; guards the fields below
	file vfs.File
	name string
	size int64
	logs map[*Log]struct{} // logs with records in file
}

type sealedJournal struct {
	name string
	logs map[*Log]struct{}
}

// journalRecord is one log's record of one round, as read back.
type journalRecord struct {
	seq     int64
	batches []byte
}

func journalName(seq int64) string { return fmt.Sprintf("%020d%s", seq, journalSuffix) }

// journalRecordLen is the length of a record of n bytes of batches.
func journalRecordLen(dir string, n int64) int { return journalBodyAt(dir) + int(n) }

// journalBodyAt is where a record's batches start.
func journalBodyAt(dir string) int { return journalHeaderLen + 10 + len(dir) }

// sealJournalRecord fills in the header of a record whose batches are in
// place.
func sealJournalRecord(rec []byte, seq int64, dir string) {
	body := rec[journalHeaderLen:]
	binary.BigEndian.PutUint64(body, uint64(seq))
	binary.BigEndian.PutUint16(body[8:], uint16(len(dir)))
	copy(body[10:], dir)
	binary.BigEndian.PutUint32(rec, uint32(len(body)))
	binary.BigEndian.PutUint32(rec[4:], crc32.Checksum(body, crc32c))
}

// readJournalFile returns the records of one file up to its first bad one,
// and the number of bytes after that point.
func readJournalFile(fsys vfs.FS, name string, fn func(dir string, r journalRecord)) (torn int64, err error) {
	f, err := fsys.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	size := st.Size()
	r := bufio.NewReaderSize(io.NewSectionReader(f, 0, size), 1<<20)
	var hdr [journalHeaderLen]byte
	for pos := int64(0); pos < size; {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return size - pos, nil
		}
		n := int64(binary.BigEndian.Uint32(hdr[:]))
		if n < 10 || n > size-pos-journalHeaderLen {
			return size - pos, nil
		}
		body := make([]byte, n)
		if _, err := io.ReadFull(r, body); err != nil {
			return size - pos, nil
		}
		dirLen := int64(binary.BigEndian.Uint16(body[8:]))
		if crc32.Checksum(body, crc32c) != binary.BigEndian.Uint32(hdr[4:]) || 10+dirLen > n {
			return size - pos, nil
		}
		fn(string(body[10:10+dirLen]), journalRecord{seq: int64(binary.BigEndian.Uint64(body)), batches: body[10+dirLen:]})
		pos += journalHeaderLen + n
	}
	return 0, nil
}

// journalFiles lists the journal's files, oldest first, with the sequence
// number each is named by.
func journalFiles(fsys vfs.FS, dir string) ([]string, []int64, error) {
	entries, err := fsys.ReadDir(dir)
	if err != nil {
		return nil, nil, err
	}
	var seqs []int64
	for _, e := range entries {
		digits, ok := strings.CutSuffix(e.Name(), journalSuffix)
		if !ok || len(digits) != 20 {
			continue
		}
		if seq, err := strconv.ParseInt(digits, 10, 64); err == nil {
			seqs = append(seqs, seq)
		}
	}
	slices.Sort(seqs)
	names := make([]string, len(seqs))
	for i, seq := range seqs {
		names[i] = filepath.Join(dir, journalName(seq))
	}
	return names, seqs, nil
}

// openJournal replays what the journal under dataDir holds into the logs
// it names, then starts a new journal file and removes the old ones.
func openJournal(fsys vfs.FS, dataDir string, logger *slog.Logger) (*journal, error) {
	j := &journal{fs: fsys, dir: filepath.Join(dataDir, journalDirName), logger: logger}
	j.tails.max = defaultTailBudget
	if err := fsys.MkdirAll(j.dir, 0o755); err != nil {
		return nil, err
	}
	names, seqs, err := journalFiles(fsys, j.dir)
	if err != nil {
		return nil, err
	}
	next := int64(0)
	records := map[string][]journalRecord{}
	for i, name := range names {
		next = max(next, seqs[i])
		torn, err := readJournalFile(fsys, name, func(dir string, r journalRecord) {
			records[dir] = append(records[dir], r)
			next = max(next, r.seq+1)
		})
		if err != nil {
			return nil, err
		}
		if torn > 0 {
			logger.Warn("journal file ends with a torn record; ignoring it", "file", name, "bytes", torn)
		}
	}
	j.next.Store(next)
	dirs := make([]string, 0, len(records))
	for dir := range records {
		dirs = append(dirs, dir)
	}
	sort.Strings(dirs)
	for _, dir := range dirs {
		if err := j.replay(filepath.Join(dataDir, dir), records[dir]); err != nil {
			return nil, err
		}
	}
	if err := j.startFile(); err != nil {
		return nil, err
	}
	for _, name := range names {
		if name != j.name {
			if err := fsys.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return nil, err
			}
		}
	}
	return j, fsys.SyncDir(j.dir)
}

// replay lays a log's records over it (see the comment at the top) and
// syncs what that appended. A log whose directory is gone was deleted: its
// records are dropped. The log is then let go as a crash would leave it,
// so that its next open recovers it as usual; closing it cleanly would
// cost a checkpoint and index writes for every log the journal names,
// seconds for a thousand.
func (j *journal) replay(dir string, records []journalRecord) error {
	if _, err := j.fs.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	l, err := Open(dir, Defaults(), Options{FS: j.fs, Logger: j.logger, journal: j})
	if err != nil {
		return err
	}
	appended, err := l.applyJournal(records)
	if err == nil && appended {
		err = l.Flush()
	}
	if cerr := l.closeUnsynced(); err == nil {
		err = cerr
	}
	return err
}

// applyJournal appends what the records hold past the log's end, and
// reports whether it appended anything.
func (l *Log) applyJournal(records []journalRecord) (bool, error) {
	fence := l.fence.Load()
	// Rounds write in the order of their numbers; sorting keeps that rule
	// in one place should they ever not.
	sort.SliceStable(records, func(a, b int) bool { return records[a].seq < records[b].seq })
	var history []model.Batch // contiguous by offset, the latest of each
	for _, r := range records {
		if r.seq < fence {
			continue
		}
		batches := wholeValidBatches(r.batches)
		if len(batches) == 0 {
			continue
		}
		first := batches[0].BaseOffset()
		keep := 0
		for keep < len(history) && history[keep].LastOffset() < first {
			keep++
		}
		history = append(history[:keep], batches...)
	}
	replayed := 0
	for _, b := range history {
		end := l.EndOffset()
		switch {
		case b.LastOffset() < end:
			continue
		case b.BaseOffset() > end:
			return replayed > 0, &CorruptLogError{File: l.dir, Pos: -1,
				Reason: fmt.Sprintf("the journal goes on at offset %d but the log ends at %d: durable data is missing", b.BaseOffset(), end)}
		case b.BaseOffset() < end:
			if err := l.Truncate(b.BaseOffset()); err != nil {
				return replayed > 0, err
			}
		}
		if _, err := l.appendReplicated(b, nil, false); err != nil {
			return replayed > 0, err
		}
		replayed++
	}
	if replayed > 0 {
		l.logger.Warn("restored batches from the journal", "batches", replayed, "end_offset", l.EndOffset())
	}
	return replayed > 0, nil
}

// wholeValidBatches splits data into batches, up to the first that is cut
// short or fails its CRC.
func wholeValidBatches(data []byte) []model.Batch {
	var out []model.Batch
	r := model.NewBatchReader(data)
	for b, ok := r.Next(); ok; b, ok = r.Next() {
		if _, err := batchSize(b, 0); err != nil || checkCRC(b) != nil || b.LastOffset() < b.BaseOffset() {
			break
		}
		out = append(out, b)
	}
	return out
}

// startFile makes a new current file, named by the next sequence number,
// durable in the directory before any record goes to it. Called with mu
// held, or before the journal is shared.
func (j *journal) startFile() error {
	name := filepath.Join(j.dir, journalName(j.next.Load()))
	f, err := j.fs.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if err := j.fs.SyncDir(j.dir); err != nil {
		f.Close()
		return err
	}
	j.file, j.name, j.size, j.logs = f, name, 0, map[*Log]struct{}{}
	return nil
}

// journalSpan is a range of a log's active segment file.
type journalSpan struct {
	file     vfs.File
	from, to int64
}

// journalBatch is a round's records, laid out in one buffer.
type journalBatch struct {
	buf  []byte
	logs []*Log // with a record in buf
}

// buildJournalBatch reads each request's span (set by the round) into its
// record; the reads run on two goroutines, as a round reads hundreds of
// files. A request whose span could not be read is marked to sync its own
// file, and its record is left out.
func buildJournalBatch(seq int64, batch []*syncRequest) journalBatch {
	type rec struct {
		r     *syncRequest
		at    int
		dir   string
		ended int // at + the record's length
	}
	var recs []rec
	total := 0
	for _, r := range batch {
		if r.ownSync || r.span.to == r.span.from {
			continue
		}
		dir := filepath.Base(r.log.dir)
		end := total + journalRecordLen(dir, r.span.to-r.span.from)
		recs = append(recs, rec{r: r, at: total, dir: dir, ended: end})
		total = end
	}
	buf := make([]byte, total)
	read := func(part []rec) {
		for _, rc := range part {
			sp := rc.r.span
			if _, err := sp.file.ReadAt(buf[rc.at+journalBodyAt(rc.dir):rc.ended], sp.from); err != nil {
				rc.r.ownSync = true
				continue
			}
			sealJournalRecord(buf[rc.at:rc.ended], seq, rc.dir)
		}
	}
	if half := len(recs) / 2; half >= 64 {
		var wg sync.WaitGroup
		wg.Go(func() { read(recs[half:]) })
		read(recs[:half])
		wg.Wait()
	} else {
		read(recs)
	}
	b := journalBatch{buf: buf[:0]}
	for _, rc := range recs {
		// Kept in place; only a failed read (rare) moves what follows.
		switch {
		case rc.r.ownSync:
			continue
		case len(b.buf) == rc.at:
			b.buf = buf[:rc.ended]
		default:
			b.buf = append(b.buf, buf[rc.at:rc.ended]...)
		}
		b.logs = append(b.logs, rc.r.log)
	}
	return b
}

// commit appends a round's records and syncs them, calling locked once it
// holds the journal (the next round may then read its logs). It returns the file
// sealed to make room, if any, and false when the journal failed (the
// round then syncs its logs the usual way).
func (j *journal) commit(b journalBatch, locked func()) (*sealedJournal, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	locked() // rounds write in the order they took their sequence numbers
	if j.file == nil || j.broken.Load() {
		return nil, false
	}
	var sealed *sealedJournal
	if j.size > 0 && j.size+int64(len(b.buf)) > journalFileBytes {
		old := &sealedJournal{name: j.name, logs: j.logs}
		if err := j.file.Close(); err != nil {
			return nil, j.fail(err)
		}
		j.file = nil
		if err := j.startFile(); err != nil {
			return nil, j.fail(err)
		}
		sealed = old
	}
	if len(b.buf) > 0 {
		if _, err := j.file.Write(b.buf); err != nil {
			return sealed, j.fail(err)
		}
		if err := j.file.Sync(); err != nil {
			return sealed, j.fail(err)
		}
		j.size += int64(len(b.buf))
		for _, l := range b.logs {
			j.logs[l] = struct{}{}
		}
	}
	return sealed, true
}

// fail marks the journal broken. Called with mu held.
func (j *journal) fail(err error) bool {
	if !j.broken.Swap(true) {
		j.logger.Error("journal write failed; logs sync their own files from now on", "err", err)
	}
	return false
}

// reset seals the current file and starts an empty one, returning the
// sealed file: after a clean close of every log nothing in it is needed.
func (j *journal) reset() (*sealedJournal, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.file == nil {
		return nil, nil
	}
	for l := range j.logs {
		if l.failure() != nil {
			return nil, nil // its records may be all that holds its data: replay them
		}
	}
	old := &sealedJournal{name: j.name, logs: j.logs}
	err := j.file.Close()
	j.file = nil
	if err != nil {
		return nil, err
	}
	if j.size == 0 {
		return nil, nil // empty: keep it as the current file's name holds the sequence
	}
	if err := j.startFile(); err != nil {
		return nil, err
	}
	j.file.Close()
	j.file = nil
	return old, nil
}

// remove deletes a sealed file whose logs are synced.
func (j *journal) remove(s *sealedJournal) error {
	if err := j.fs.Remove(s.name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
