package log

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/strandlog/strand/internal/log/vfs"
)

// checkpointFile holds a partition's offsets that are not derivable from its
// segments, plus whether the log was closed cleanly. It is small text, written
// atomically (temporary file, fsync, rename, directory fsync).
const checkpointFile = "partition.checkpoint"

type checkpoint struct {
	logStart      int64
	highWatermark int64
	recoveryPoint int64 // every offset below was durable when written
	cleanedEnd    int64 // compaction may have left offset gaps below this
	clean         bool  // written by Close: the segments need no scan
	// journalFence: journal records below this sequence number are never
	// replayed into the log (see journal.go).
	journalFence int64
	// restartPending: a restart (StartAt) committed and may not have
	// finished; Open removes every segment but the one at restartBase, where the
	// new log's segments start (startat.go). Written only while a restart
	// runs.
	restartPending bool
	restartBase    int64
}

func (c checkpoint) marshal() []byte {
	clean := 0
	if c.clean {
		clean = 1
	}
	b := fmt.Appendf(nil, "strand-partition-checkpoint 1\nlog-start-offset %d\nhigh-watermark %d\nrecovery-point %d\ncleaned-offset %d\nclean-shutdown %d\njournal-fence %d\n",
		c.logStart, c.highWatermark, c.recoveryPoint, c.cleanedEnd, clean, c.journalFence)
	if c.restartPending {
		b = fmt.Appendf(b, "restart-at %d\n", c.restartBase)
	}
	return b
}

// readCheckpoint returns the zero checkpoint (unclean, everything to scan)
// when the file does not exist.
func readCheckpoint(fsys vfs.FS, dir string) (checkpoint, error) {
	b, err := vfs.ReadFile(fsys, filepath.Join(dir, checkpointFile))
	if errors.Is(err, fs.ErrNotExist) {
		return checkpoint{}, nil
	}
	if err != nil {
		return checkpoint{}, err
	}
	var c checkpoint
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 0; sc.Scan(); n++ {
		key, val, ok := strings.Cut(sc.Text(), " ")
		v, perr := strconv.ParseInt(val, 10, 64)
		if !ok || perr != nil {
			return checkpoint{}, fmt.Errorf("%s line %d: %q", checkpointFile, n+1, sc.Text())
		}
		switch key {
		case "strand-partition-checkpoint":
			if v != 1 {
				return checkpoint{}, fmt.Errorf("%s: unknown version %d", checkpointFile, v)
			}
		case "log-start-offset":
			c.logStart = v
		case "high-watermark":
			c.highWatermark = v
		case "recovery-point":
			c.recoveryPoint = v
		case "cleaned-offset":
			c.cleanedEnd = v
		case "clean-shutdown":
			c.clean = v == 1
		case "journal-fence":
			c.journalFence = v
		case "restart-at":
			c.restartPending, c.restartBase = true, v
		}
	}
	return c, nil
}

func writeCheckpoint(fsys vfs.FS, dir string, c checkpoint) error {
	return vfs.WriteFileAtomic(fsys, filepath.Join(dir, checkpointFile), c.marshal())
}
