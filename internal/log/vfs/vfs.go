// Package vfs is the file system the partition log writes through: the
// operating system's in production, an in-memory one in tests that can
// clone only what was synced, to test crash recovery without killing
// processes, and one that injects I/O errors.
//
// MemFS models durability as strictly as POSIX promises it. A file's bytes
// and size are durable only as of its last File.Sync; a directory's
// entries (creations, renames, removals) only as of its last SyncDir, and a
// rename between two directories needs both synced. Directories made by
// MkdirAll are durable at once, since the log creates them once at start
// and what matters is the files in them. CrashClone keeps only what is
// durable, or, given a random source, also some of what a disk may have
// written anyway.
package vfs

import (
	"io"
	"io/fs"
)

// File is the part of *os.File the log uses. OS files are *os.File, so the
// server can send a file section with sendfile.
type File interface {
	io.ReaderAt
	io.WriterAt
	io.Writer
	io.Closer
	Name() string
	Sync() error
	Truncate(size int64) error
	Stat() (fs.FileInfo, error)
}

// FS is the part of package os the log uses. Names are slash-separated
// paths as for package os.
type FS interface {
	// OpenFile opens like os.OpenFile (flags os.O_RDONLY, O_RDWR, O_CREATE,
	// O_EXCL, O_TRUNC, O_APPEND).
	OpenFile(name string, flag int, perm fs.FileMode) (File, error)
	Remove(name string) error
	RemoveAll(name string) error
	Rename(oldname, newname string) error
	MkdirAll(name string, perm fs.FileMode) error
	ReadDir(name string) ([]fs.DirEntry, error)
	Stat(name string) (fs.FileInfo, error)
	// SyncDir makes the directory's entries (creations, renames, removals)
	// durable.
	SyncDir(name string) error
	// OpenSyncAll opens a handle on the file system holding the directory
	// name that makes everything on it durable in one call.
	OpenSyncAll(name string) (SyncAll, error)
}

// SyncAll makes a whole file system durable at once, as syncfs(2) does:
// every file's bytes and size and every directory's entries. One call
// stands for many File.Sync calls that would each wait for their own
// device flush. Sync reports a write-back error of any file on the file
// system since the handle was opened, so a handle is opened once and
// kept: one opened later would not see an earlier error.
type SyncAll interface {
	Sync() error
	Close() error
}
