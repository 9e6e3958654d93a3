package dirlock

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// FileName is the lock file in a locked directory.
const FileName = ".lock"

// HeldError is a refused Acquire: another open file description, in this
// process or another, holds the directory.
type HeldError struct {
	Dir string
	PID int // the holder's process id as it wrote it; 0 when unknown
}

// Error reads as the end of a sentence that names what the directory is:
// "data directory " + err.Error().
func (e *HeldError) Error() string {
	holder := "another process"
	if e.PID > 0 {
		holder = "process " + strconv.Itoa(e.PID)
	}
	return fmt.Sprintf("%s is in use: %s holds %s", e.Dir, holder, filepath.Join(e.Dir, FileName))
}

// Lock is a held directory.
type Lock struct {
	dir string
	f   *os.File
}

// Acquire takes dir's lock, which must exist as a directory, or fails at
// once with a *HeldError when another holds it.
func Acquire(dir string) (*Lock, error) {
	f, err := os.OpenFile(filepath.Join(dir, FileName), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("locking %s: %w", dir, err)
	}
	if err := flock(f); err != nil {
		defer f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, &HeldError{Dir: dir, PID: readPID(f)}
		}
		return nil, fmt.Errorf("locking %s: %w", dir, err)
	}
	// The pid is a courtesy to whoever is refused next; a failure to write
	// it leaves the lock held all the same.
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &Lock{dir: dir, f: f}, nil
}

func flock(f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}

// readPID is the pid a holder wrote, 0 when there is none yet.
func readPID(f *os.File) int {
	b := make([]byte, 32)
	n, _ := f.ReadAt(b, 0)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b[:n])))
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}

// Dir is the locked directory.
func (l *Lock) Dir() string { return l.dir }

// Release gives the directory up. A nil Lock, or one released already,
// releases nothing.
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close() // closing the last descriptor drops the flock
	l.f = nil
	return err
}
