package vfs

import (
	"io/fs"
	"strconv"
)

// Op is a file system operation an Injector may fail.
type Op int

// The operations of FS and File. Write covers Write and WriteAt, Remove
// covers RemoveAll, and Stat covers both FS.Stat and File.Stat.
const (
	OpOpen Op = iota
	OpRead
	OpWrite
	OpSync
	OpTruncate
	OpRemove
	OpRename
	OpSyncDir
	OpReadDir
	OpStat
	OpMkdir
	OpClose
	OpSyncAll
	OpWriteback
)

var opNames = [...]string{"open", "read", "write", "sync", "truncate", "remove",
	"rename", "syncdir", "readdir", "stat", "mkdir", "close", "syncall", "writeback"}

// String returns the operation's name as used in errors, e.g. "write".
func (op Op) String() string {
	if op >= 0 && int(op) < len(opNames) {
		return opNames[op]
	}
	return "Op(" + strconv.Itoa(int(op)) + ")"
}

// Injector is asked before each operation of an error FS, with the path it
// concerns (a file's name as opened; for Rename, the old name). A non-nil
// error fails the operation without performing it. It is called from
// whichever goroutines use the FS, so it must be safe for that.
type Injector func(op Op, name string) error

// NewErrorFS returns inner with the failures inject chooses. Injected
// errors come wrapped in *fs.PathError, so errors.Is finds them. Its files
// wrap inner's, so over OS they are not *os.File and sendfile is off.
// A nil inject fails nothing.
func NewErrorFS(inner FS, inject Injector) FS { return &errorFS{inner, inject} }

type errorFS struct {
	inner  FS
	inject Injector
}

func (e *errorFS) fail(op Op, name string) error {
	if e.inject == nil {
		return nil
	}
	if err := e.inject(op, name); err != nil {
		return &fs.PathError{Op: op.String(), Path: name, Err: err}
	}
	return nil
}

func (e *errorFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	if err := e.fail(OpOpen, name); err != nil {
		return nil, err
	}
	f, err := e.inner.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &errorFile{f, e}, nil
}

func (e *errorFS) Remove(name string) error {
	if err := e.fail(OpRemove, name); err != nil {
		return err
	}
	return e.inner.Remove(name)
}

func (e *errorFS) RemoveAll(name string) error {
	if err := e.fail(OpRemove, name); err != nil {
		return err
	}
	return e.inner.RemoveAll(name)
}

func (e *errorFS) Rename(oldname, newname string) error {
	if err := e.fail(OpRename, oldname); err != nil {
		return err
	}
	return e.inner.Rename(oldname, newname)
}

func (e *errorFS) MkdirAll(name string, perm fs.FileMode) error {
	if err := e.fail(OpMkdir, name); err != nil {
		return err
	}
	return e.inner.MkdirAll(name, perm)
}

func (e *errorFS) ReadDir(name string) ([]fs.DirEntry, error) {
	if err := e.fail(OpReadDir, name); err != nil {
		return nil, err
	}
	return e.inner.ReadDir(name)
}

func (e *errorFS) Stat(name string) (fs.FileInfo, error) {
	if err := e.fail(OpStat, name); err != nil {
		return nil, err
	}
	return e.inner.Stat(name)
}

func (e *errorFS) SyncDir(name string) error {
	if err := e.fail(OpSyncDir, name); err != nil {
		return err
	}
	return e.inner.SyncDir(name)
}

func (e *errorFS) OpenSyncAll(name string) (SyncAll, error) {
	if err := e.fail(OpOpen, name); err != nil {
		return nil, err
	}
	s, err := e.inner.OpenSyncAll(name)
	if err != nil {
		return nil, err
	}
	return &errorSyncAll{s, e, name}, nil
}

type errorSyncAll struct {
	inner SyncAll
	fs    *errorFS
	name  string
}

func (s *errorSyncAll) Sync() error {
	if err := s.fs.fail(OpSyncAll, s.name); err != nil {
		return err
	}
	return s.inner.Sync()
}

func (s *errorSyncAll) Close() error { return s.inner.Close() }

// errorFile embeds the inner File for Name; every other method asks the
// injector first.
type errorFile struct {
	File
	fs *errorFS
}

func (f *errorFile) ReadAt(p []byte, off int64) (int, error) {
	if err := f.fs.fail(OpRead, f.Name()); err != nil {
		return 0, err
	}
	return f.File.ReadAt(p, off)
}

func (f *errorFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.fs.fail(OpWrite, f.Name()); err != nil {
		return 0, err
	}
	return f.File.WriteAt(p, off)
}

func (f *errorFile) Write(p []byte) (int, error) {
	if err := f.fs.fail(OpWrite, f.Name()); err != nil {
		return 0, err
	}
	return f.File.Write(p)
}

func (f *errorFile) Sync() error {
	if err := f.fs.fail(OpSync, f.Name()); err != nil {
		return err
	}
	return f.File.Sync()
}

// Writeback makes error files Writebackers, so their writebacks are seen
// by the injector and reach the inner file.
func (f *errorFile) Writeback(off, n int64, wait bool) error {
	if err := f.fs.fail(OpWriteback, f.Name()); err != nil {
		return err
	}
	return Writeback(f.File, off, n, wait)
}

func (f *errorFile) Truncate(size int64) error {
	if err := f.fs.fail(OpTruncate, f.Name()); err != nil {
		return err
	}
	return f.File.Truncate(size)
}

func (f *errorFile) Stat() (fs.FileInfo, error) {
	if err := f.fs.fail(OpStat, f.Name()); err != nil {
		return nil, err
	}
	return f.File.Stat()
}

// Close closes the inner file even when failing: close(2) releases the
// descriptor whatever it reports, and a test must not leak it.
func (f *errorFile) Close() error {
	err := f.fs.fail(OpClose, f.Name())
	if cerr := f.File.Close(); err == nil {
		err = cerr
	}
	return err
}
