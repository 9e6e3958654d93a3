package log

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"

	"github.com/strandlog/strand/internal/log/vfs"
)

// epochFile is Kafka's leader-epoch-checkpoint: a version line (0), a count
// line, then "epoch startOffset" per line. Replication uses it to find where
// a follower's log diverges from the leader's.
const epochFile = "leader-epoch-checkpoint"

// EpochEntry says that leader epoch Epoch wrote its first batch at
// StartOffset.
type EpochEntry struct {
	Epoch       int32
	StartOffset int64
}

// epochCache is the in-memory list of epochs, ascending in both fields.
// A new epoch is recorded in memory only, on the append path; epochFile is
// rewritten with the partition checkpoint (before it, so the recovery point
// never passes an epoch the file lacks) and at close. After a crash,
// recovery finds the epochs of the batches past the recovery point in the
// batches themselves (Log.rebuildEpochs). Truncations, which are rare,
// rewrite the file at once. Guarded by Log.mu.
type epochCache struct {
	fs      vfs.FS
	path    string
	entries []EpochEntry
	dirty   bool // entries not yet in epochFile
}

func loadEpochs(fsys vfs.FS, dir, name string) (*epochCache, error) {
	c := &epochCache{fs: fsys, path: filepath.Join(dir, name)}
	b, err := vfs.ReadFile(fsys, c.path)
	if errors.Is(err, fs.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	var version, count int
	if !sc.Scan() || scanInts(sc.Text(), &version) != nil || version != 0 {
		return nil, fmt.Errorf("%s: bad version line", c.path)
	}
	if !sc.Scan() || scanInts(sc.Text(), &count) != nil {
		return nil, fmt.Errorf("%s: bad count line", c.path)
	}
	for sc.Scan() {
		var e EpochEntry
		if _, err := fmt.Sscanf(sc.Text(), "%d %d", &e.Epoch, &e.StartOffset); err != nil {
			return nil, fmt.Errorf("%s: %q: %v", c.path, sc.Text(), err)
		}
		c.entries = append(c.entries, e)
	}
	if len(c.entries) != count {
		return nil, fmt.Errorf("%s: %d entries, header says %d", c.path, len(c.entries), count)
	}
	return c, nil
}

func scanInts(s string, v *int) error {
	_, err := fmt.Sscanf(s, "%d", v)
	return err
}

func (c *epochCache) store() error {
	b := fmt.Appendf(nil, "0\n%d\n", len(c.entries))
	for _, e := range c.entries {
		b = fmt.Appendf(b, "%d %d\n", e.Epoch, e.StartOffset)
	}
	if err := vfs.WriteFileAtomic(c.fs, c.path, b); err != nil {
		return err
	}
	c.dirty = false
	return nil
}

// flush writes epochFile if it lacks entries.
func (c *epochCache) flush() error {
	if !c.dirty {
		return nil
	}
	return c.store()
}

func (c *epochCache) latest() int32 {
	if len(c.entries) == 0 {
		return -1
	}
	return c.entries[len(c.entries)-1].Epoch
}

// assign records, in memory, that epoch starts at offset, if it is newer
// than the latest.
func (c *epochCache) assign(epoch int32, offset int64) {
	if epoch < 0 || epoch <= c.latest() {
		return
	}
	c.entries = append(c.entries, EpochEntry{Epoch: epoch, StartOffset: offset})
	c.dirty = true
}

// truncateFromEnd drops the epochs that start at or after offset (the log
// was truncated there).
func (c *epochCache) truncateFromEnd(offset int64) error {
	i := sort.Search(len(c.entries), func(i int) bool { return c.entries[i].StartOffset >= offset })
	if i == len(c.entries) {
		return nil
	}
	c.entries = c.entries[:i]
	return c.store()
}

// truncateFromStart drops epochs wholly below the log start and moves the
// start of the one that spans it.
func (c *epochCache) truncateFromStart(offset int64) error {
	i := sort.Search(len(c.entries), func(i int) bool { return c.entries[i].StartOffset > offset })
	if i == 0 || (i == 1 && c.entries[0].StartOffset == offset) {
		return nil
	}
	keep := c.entries[i-1]
	keep.StartOffset = offset
	c.entries = append([]EpochEntry{keep}, c.entries[i:]...)
	return c.store()
}

// endOffset answers OffsetForLeaderEpoch: the largest epoch at or below the
// one asked for, and the offset where it ended (the start of the next epoch,
// or the log end for the latest). Both are -1 when the log has no such epoch.
func (c *epochCache) endOffset(epoch int32, logEnd int64) (int32, int64) {
	i := sort.Search(len(c.entries), func(i int) bool { return c.entries[i].Epoch > epoch })
	if i == 0 {
		return -1, -1
	}
	if i == len(c.entries) {
		return c.entries[i-1].Epoch, logEnd
	}
	return c.entries[i-1].Epoch, c.entries[i].StartOffset
}
