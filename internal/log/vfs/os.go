package vfs

import (
	"io/fs"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// OS is the operating system's file system. Its files are *os.File, so
// callers may type-assert for sendfile.
var OS FS = osFS{}

type osFS struct{}

var _ File = (*os.File)(nil)

func (osFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err // not f: a nil *os.File in a File would not be nil
	}
	return f, nil
}

func (osFS) Remove(name string) error                     { return os.Remove(name) }
func (osFS) RemoveAll(name string) error                  { return os.RemoveAll(name) }
func (osFS) Rename(oldname, newname string) error         { return os.Rename(oldname, newname) }
func (osFS) MkdirAll(name string, perm fs.FileMode) error { return os.MkdirAll(name, perm) }
func (osFS) ReadDir(name string) ([]fs.DirEntry, error)   { return os.ReadDir(name) }
func (osFS) Stat(name string) (fs.FileInfo, error)        { return os.Stat(name) }

// SyncDir fsyncs the directory itself: on Linux that is what makes entries
// created, renamed or removed in it survive a power loss.
func (osFS) SyncDir(name string) error {
	d, err := os.Open(name)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// OpenSyncAll keeps the directory open: syncfs(2) reports the write-back
// errors seen on the file system since its descriptor was opened.
func (osFS) OpenSyncAll(name string) (SyncAll, error) {
	d, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	return osSyncAll{d}, nil
}

type osSyncAll struct{ dir *os.File }

func (s osSyncAll) Sync() error {
	sc, err := s.dir.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := sc.Control(func(fd uintptr) { serr = unix.Syncfs(int(fd)) }); err != nil {
		return err
	}
	if serr != nil {
		return &fs.PathError{Op: "syncfs", Path: s.dir.Name(), Err: serr}
	}
	return nil
}

func (s osSyncAll) Close() error { return s.dir.Close() }

// Device returns the number of the device holding a file, when info came
// from the operating system.
func Device(info fs.FileInfo) (uint64, bool) {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return uint64(st.Dev), true
}

// Writebacker is a File that can write a range of its dirty pages to the
// device ahead of any fsync. Test file systems implement it to observe
// what the log hands to the disk early.
type Writebacker interface {
	Writeback(off, n int64, wait bool) error
}

// Writeback starts writing f's bytes [off, off+n) to the device, and with
// wait also waits until they are written, as sync_file_range(2) does. It
// makes nothing durable: the file's size and metadata are left to fsync.
// Files that cannot do it succeed without doing anything.
func Writeback(f File, off, n int64, wait bool) error {
	switch f := f.(type) {
	case *os.File:
		sc, err := f.SyscallConn()
		if err != nil {
			return err
		}
		flags := unix.SYNC_FILE_RANGE_WRITE
		if wait {
			flags |= unix.SYNC_FILE_RANGE_WAIT_BEFORE | unix.SYNC_FILE_RANGE_WAIT_AFTER
		}
		var serr error
		if err := sc.Control(func(fd uintptr) { serr = unix.SyncFileRange(int(fd), off, n, flags) }); err != nil {
			// Only a closed descriptor refuses Control.
			return &fs.PathError{Op: "sync_file_range", Path: f.Name(), Err: fs.ErrClosed}
		}
		if serr != nil {
			return &fs.PathError{Op: "sync_file_range", Path: f.Name(), Err: serr}
		}
		return nil
	case Writebacker:
		return f.Writeback(off, n, wait)
	}
	return nil
}
