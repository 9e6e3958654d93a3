package log

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"slices"
	"testing"

	"github.com/strandlog/strand/internal/log/vfs"
)

// fileLen is the length of a file as its file system holds it.
func fileLen(t *testing.T, fsys vfs.FS, name string) int64 {
	t.Helper()
	st, err := fsys.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// TestTailFile: small appends stay in memory and reads see them; a large
// one, a sync, a stat or an exhausted budget puts them in the file; a
// truncation inside the tail cuts only memory; Close gives the budget back.
func TestTailFile(t *testing.T) {
	mem := vfs.NewMem()
	f, err := mem.OpenFile("/seg.log", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	budget := &tailBudget{max: 1 << 20}
	tf := newTailFile(f, 0, budget)
	var want []byte
	add := func(p []byte) {
		t.Helper()
		if err := tf.appendTail(p, int64(len(want))); err != nil {
			t.Fatal(err)
		}
		want = append(want, p...)
	}
	readBack := func() {
		t.Helper()
		got := make([]byte, len(want))
		if n, err := tf.ReadAt(got, 0); n != len(want) || err != nil {
			t.Fatalf("ReadAt = %d, %v; want %d, nil", n, err, len(want))
		}
		if !bytes.Equal(got, want) {
			t.Fatal("ReadAt returned other bytes than were appended")
		}
		if n, err := tf.ReadAt(make([]byte, 10), int64(len(want))-5); n != 5 || err != io.EOF {
			t.Fatalf("ReadAt past the end = %d, %v; want 5, EOF", n, err)
		}
	}

	add([]byte("first batch "))
	add([]byte("second batch "))
	if n := fileLen(t, mem, "/seg.log"); n != 0 {
		t.Fatalf("file holds %d bytes after two small appends, want 0 (in memory)", n)
	}
	if budget.held.Load() != tailBufferBytes {
		t.Fatalf("budget holds %d, want one buffer", budget.held.Load())
	}
	readBack()

	add(bytes.Repeat([]byte("L"), tailBufferBytes/2)) // large: written with the tail
	if n := fileLen(t, mem, "/seg.log"); n != int64(len(want)) {
		t.Fatalf("file holds %d bytes after a large append, want %d", n, len(want))
	}
	add([]byte("third "))
	add([]byte("fourth"))
	readBack()
	if err := tf.Truncate(int64(len(want) - len("fourth"))); err != nil {
		t.Fatal(err)
	}
	want = want[:len(want)-len("fourth")]
	readBack()
	// The part in the file and the part in memory, read across the line.
	across := make([]byte, 8)
	if _, err := tf.ReadAt(across, int64(len(want))-10); err != nil || !bytes.Equal(across, want[len(want)-10:len(want)-2]) {
		t.Fatalf("read across file and tail: %q, %v", across, err)
	}

	if err := tf.Sync(); err != nil {
		t.Fatal(err)
	}
	if n := fileLen(t, mem, "/seg.log"); n != int64(len(want)) {
		t.Fatalf("file holds %d bytes after Sync, want %d", n, len(want))
	}
	if budget.held.Load() != 0 {
		t.Fatalf("budget holds %d after Sync, want 0", budget.held.Load())
	}

	// A small section reaching into the tail is copied from memory; a
	// large one is sent from the file, which gets the tail first.
	for len(want) < sendfileMin {
		add(bytes.Repeat([]byte("S"), tailBufferBytes/2))
	}
	add([]byte("newest"))
	if f, err := tf.sectionFile(int64(len(want))-6, int64(len(want))); err != nil || f != tf {
		t.Fatalf("small section at the end reads %T (%v), want the tail", f, err)
	}
	if n := fileLen(t, mem, "/seg.log"); n != int64(len(want))-6 {
		t.Fatalf("file holds %d bytes after a small section, want %d (tail kept)", n, len(want)-6)
	}
	if f, err := tf.sectionFile(0, int64(len(want))); err != nil || f != tf.File {
		t.Fatalf("large section reads %T (%v), want the file", f, err)
	}
	if n := fileLen(t, mem, "/seg.log"); n != int64(len(want)) {
		t.Fatalf("file holds %d bytes after a large section, want %d", n, len(want))
	}
	if err := tf.Flush(); err != nil {
		t.Fatal(err)
	}

	// Out of budget: written through.
	budget.max = tailBufferBytes - 1
	add([]byte("fifth"))
	if n := fileLen(t, mem, "/seg.log"); n != int64(len(want)) {
		t.Fatalf("file holds %d bytes with no budget left, want %d", n, len(want))
	}
	budget.max = 1 << 20
	add([]byte("sixth"))
	readBack()
	if err := tf.Close(); err != nil {
		t.Fatal(err)
	}
	if budget.held.Load() != 0 {
		t.Fatalf("budget holds %d after Close, want 0", budget.held.Load())
	}
}

// segmentLen is the length of the file of a log's active segment.
func segmentLen(t *testing.T, fsys vfs.FS, l *Log) (file, logical int64) {
	t.Helper()
	l.mu.RLock()
	s := l.active()
	name, size := s.path(logSuffix), s.size
	l.mu.RUnlock()
	return fileLen(t, fsys, name), size
}

// TestJournaledLogsKeepTailsInMemory: once a log's syncs go to the journal
// its appends stay in memory, so a round costs no write or read of its
// file; readers still get every batch, and a power loss loses nothing
// that was synced.
func TestJournaledLogsKeepTailsInMemory(t *testing.T) {
	mem, m, logs := journaledManager(t, testSyncAllMin)
	for r := range 3 {
		syncAll(t, appendEach(t, logs, fmt.Sprint("r", r, "-")))
	}
	for i, l := range logs {
		file, logical := segmentLen(t, mem, l)
		if file >= logical {
			t.Fatalf("log %d: file holds %d of %d bytes; want the journaled rounds in memory", i, file, logical)
		}
	}
	if held := m.syncer.journal.tails.held.Load(); held != int64(len(logs))*tailBufferBytes {
		t.Fatalf("tails hold %d bytes of budget, want a buffer for each of %d logs", held, len(logs))
	}

	// The segments of a power-loss clone lack the tails; the journal
	// brings them back.
	crashed := mem.CrashClone(vfs.CrashOptions{})
	wantKeys := make([][]string, len(logs))
	for i, l := range logs {
		wantKeys[i] = keysOf(t, l) // reads the tail through Log.Read
		if len(wantKeys[i]) != 8 {
			t.Fatalf("log %d reads %d records, want 8", i, len(wantKeys[i]))
		}
		if file, logical := segmentLen(t, mem, l); file >= logical {
			t.Fatalf("log %d: file holds %d of %d bytes after small reads; want them copied from memory", i, file, logical)
		}
	}
	for i, keys := range crashedLogKeys(t, crashed, len(logs)) {
		if !slices.Equal(keys, wantKeys[i]) {
			t.Fatalf("log %d after a crash: %v, want %v", i, keys, wantKeys[i])
		}
	}
}

// TestTailsWriteThroughWithoutTheJournal: rounds of few logs fsync each
// file, and a log with no tail budget left writes at once; neither keeps
// bytes in memory.
func TestTailsWriteThroughWithoutTheJournal(t *testing.T) {
	mem := vfs.NewMem()
	m, logs := openManagerLogs(t, mem, testSyncAllMin)
	defer m.Close()
	syncAll(t, appendEach(t, logs[:1], "alone"))
	again := appendEach(t, logs[:1], "again")
	if file, logical := segmentLen(t, mem, logs[0]); file != logical {
		t.Fatalf("a log that fsyncs its own file holds %d of %d bytes in it", file, logical)
	}
	syncAll(t, again)

	m.syncer.journal.tails.max = 0
	syncAll(t, appendEach(t, logs, "journaled"))
	syncAll(t, appendEach(t, logs, "over budget"))
	for i, l := range logs {
		if file, logical := segmentLen(t, mem, l); file != logical {
			t.Fatalf("log %d with no budget holds %d of %d bytes in its file", i, file, logical)
		}
	}
}
