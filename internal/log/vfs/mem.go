package vfs

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// MemFS is an in-memory FS that tracks, besides what is visible, what a
// power loss would leave (see the package doc), so CrashClone can stand in
// for a crash. Paths are resolved from one root: "/a", "a" and "./a" name
// the same file. Unlike the OS, it refuses to open directories and to
// SyncDir a file, as the log does neither on purpose.
type MemFS struct {
	// One lock for the whole tree and all file contents: simple, and tests
	// do not need parallel I/O to be fast, only to be race free.
	mu   sync.RWMutex
	root *node
}

// node is an inode: a directory or a regular file.
type node struct {
	mode    fs.FileMode
	modTime time.Time
	// Directories: entries as seen now and as of the last SyncDir.
	entries, durable map[string]*node
	// Files: data as seen now and as of the last Sync. data[:clean] is
	// known to equal synced[:clean], so Sync only copies what changed, and
	// appends stay cheap. truncTo is the smallest size an unsynced Truncate
	// cut the synced bytes to, or -1: a crash may or may not keep it.
	data, synced []byte
	clean        int
	truncTo      int
}

// NewMem returns an empty MemFS whose root directory exists.
func NewMem() *MemFS { return &MemFS{root: newDir(0o755)} }

func newDir(perm fs.FileMode) *node {
	return &node{mode: fs.ModeDir | perm.Perm(), modTime: time.Now(),
		entries: map[string]*node{}, durable: map[string]*node{}}
}

func (n *node) isDir() bool { return n.mode.IsDir() }

func pathErr(op, name string, err error) error { return &fs.PathError{Op: op, Path: name, Err: err} }

// cleanPath roots name so relative and absolute names agree and ".." cannot
// escape the root.
func cleanPath(name string) string { return filepath.ToSlash(filepath.Clean("/" + name)) }

// walk resolves name to its parent directory, its last component and the
// node it names (nil if absent). The root has no parent.
func (m *MemFS) walk(op, name string) (parent *node, base string, n *node, err error) {
	p := cleanPath(name)
	if p == "/" {
		return nil, "", m.root, nil
	}
	parts := strings.Split(p[1:], "/")
	dir := m.root
	for _, part := range parts[:len(parts)-1] {
		switch dir = dir.entries[part]; {
		case dir == nil:
			return nil, "", nil, pathErr(op, name, fs.ErrNotExist)
		case !dir.isDir():
			return nil, "", nil, pathErr(op, name, syscall.ENOTDIR)
		}
	}
	base = parts[len(parts)-1]
	return dir, base, dir.entries[base], nil
}

// OpenFile opens name like os.OpenFile.
func (m *MemFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	dir, base, n, err := m.walk("open", name)
	switch {
	case err != nil:
		return nil, err
	case n == nil && flag&os.O_CREATE == 0:
		return nil, pathErr("open", name, fs.ErrNotExist)
	case n == nil:
		n = &node{mode: perm.Perm(), modTime: time.Now(), truncTo: -1}
		dir.entries[base] = n
	case flag&(os.O_CREATE|os.O_EXCL) == os.O_CREATE|os.O_EXCL:
		return nil, pathErr("open", name, fs.ErrExist)
	case n.isDir():
		return nil, pathErr("open", name, syscall.EISDIR)
	case flag&os.O_TRUNC != 0:
		n.truncate(0)
	}
	return &memFile{fs: m, n: n, name: name, flag: flag}, nil
}

// Remove removes a file or an empty directory.
func (m *MemFS) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	dir, base, n, err := m.walk("remove", name)
	switch {
	case err != nil:
		return err
	case n == nil:
		return pathErr("remove", name, fs.ErrNotExist)
	case dir == nil:
		return pathErr("remove", name, syscall.EBUSY)
	case n.isDir() && len(n.entries) > 0:
		return pathErr("remove", name, syscall.ENOTEMPTY)
	}
	delete(dir.entries, base)
	return nil
}

// RemoveAll removes name and everything under it; a missing name is not an
// error, as for os.RemoveAll.
func (m *MemFS) RemoveAll(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	dir, base, n, err := m.walk("removeall", name)
	switch {
	case errors.Is(err, fs.ErrNotExist) || err == nil && n == nil:
		return nil
	case err != nil:
		return err
	case dir == nil:
		return pathErr("removeall", name, syscall.EINVAL)
	}
	// The subtree stays attached to the detached node: if the removal is
	// not made durable, a crash brings it back whole.
	delete(dir.entries, base)
	return nil
}

// Rename renames like os.Rename: a file replaces an existing file, and a
// directory may not replace anything.
func (m *MemFS) Rename(oldname, newname string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	fail := func(err error) error { return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: err} }
	od, ob, on, err := m.walk("rename", oldname)
	if err != nil {
		return fail(errors.Unwrap(err))
	}
	nd, nb, nn, err := m.walk("rename", newname)
	switch {
	case err != nil:
		return fail(errors.Unwrap(err))
	case on == nil:
		return fail(fs.ErrNotExist)
	case on == nn:
		return nil
	case od == nil || nd == nil:
		return fail(syscall.EBUSY)
	case nn != nil && nn.isDir():
		return fail(syscall.EEXIST)
	case on.isDir() && nn != nil:
		return fail(syscall.ENOTDIR)
	case on.isDir() && strings.HasPrefix(cleanPath(newname), cleanPath(oldname)+"/"):
		return fail(syscall.EINVAL)
	}
	delete(od.entries, ob)
	nd.entries[nb] = on
	return nil
}

// MkdirAll creates name and any missing parents. New directories are
// durable at once, a simplification documented in the package doc.
func (m *MemFS) MkdirAll(name string, perm fs.FileMode) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	dir := m.root
	if p := cleanPath(name); p != "/" {
		for _, part := range strings.Split(p[1:], "/") {
			next := dir.entries[part]
			if next == nil {
				next = newDir(perm)
				dir.entries[part], dir.durable[part] = next, next
			} else if !next.isDir() {
				return pathErr("mkdir", name, syscall.ENOTDIR)
			}
			dir = next
		}
	}
	return nil
}

// ReadDir lists a directory sorted by name, like os.ReadDir.
func (m *MemFS) ReadDir(name string) ([]fs.DirEntry, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	n, err := m.lookup("readdir", name)
	if err != nil {
		return nil, err
	}
	if !n.isDir() {
		return nil, pathErr("readdir", name, syscall.ENOTDIR)
	}
	var list []fs.DirEntry
	for _, child := range slices.Sorted(maps.Keys(n.entries)) {
		list = append(list, fs.FileInfoToDirEntry(n.entries[child].info(child)))
	}
	return list, nil
}

// Stat describes name like os.Stat.
func (m *MemFS) Stat(name string) (fs.FileInfo, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	n, err := m.lookup("stat", name)
	if err != nil {
		return nil, err
	}
	return n.info(filepath.Base(name)), nil
}

// SyncDir makes the directory's current entries its durable ones.
func (m *MemFS) SyncDir(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookup("sync", name)
	if err != nil {
		return err
	}
	if !n.isDir() {
		return pathErr("sync", name, syscall.ENOTDIR)
	}
	n.durable = maps.Clone(n.entries)
	return nil
}

// OpenSyncAll returns a handle whose Sync makes the whole tree durable:
// MemFS is one file system.
func (m *MemFS) OpenSyncAll(name string) (SyncAll, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	n, err := m.lookup("open", name)
	if err != nil {
		return nil, err
	}
	if !n.isDir() {
		return nil, pathErr("open", name, syscall.ENOTDIR)
	}
	return &memSyncAll{fs: m}, nil
}

type memSyncAll struct {
	fs     *MemFS
	closed bool
}

func (s *memSyncAll) Sync() error {
	s.fs.mu.Lock()
	defer s.fs.mu.Unlock()
	if s.closed {
		return pathErr("syncall", "/", fs.ErrClosed)
	}
	syncTree(s.fs.root, map[*node]bool{})
	return nil
}

func (s *memSyncAll) Close() error {
	s.fs.mu.Lock()
	defer s.fs.mu.Unlock()
	s.closed = true
	return nil
}

// syncTree makes n and everything reachable from it durable. Entries
// removed from a directory but durable still are synced too: syncfs makes
// the removal durable, and the file's bytes no longer matter.
func syncTree(n *node, seen map[*node]bool) {
	if seen[n] {
		return
	}
	seen[n] = true
	if !n.isDir() {
		n.sync()
		return
	}
	n.durable = maps.Clone(n.entries)
	for _, c := range n.entries {
		syncTree(c, seen)
	}
}

func (m *MemFS) lookup(op, name string) (*node, error) {
	_, _, n, err := m.walk(op, name)
	if err == nil && n == nil {
		err = pathErr(op, name, fs.ErrNotExist)
	}
	return n, err
}

// CrashOptions says what CrashClone keeps beyond what was made durable.
type CrashOptions struct {
	// Rand, if non-nil, lets each file keep a random prefix of its unsynced
	// bytes, sometimes torn (partly zeros or garbage), and lets an unsynced
	// truncation survive or not; the clone is a function of its state. Nil
	// keeps exactly the synced bytes.
	Rand *rand.Rand
}

// CrashClone returns an independent MemFS holding what a power loss would
// leave of m: the durable directory entries, each file with its synced
// bytes (and more with opts.Rand). In the clone everything is durable.
func (m *MemFS) CrashClone(opts CrashOptions) *MemFS {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return &MemFS{root: crashNode(m.root, opts.Rand, map[*node]*node{})}
}

// crashNode clones n as a crash leaves it. seen keeps a file reachable
// under two durable names (a rename made durable on one side only) one
// inode, and stops a loop of durable entries from recursing forever.
func crashNode(n *node, r *rand.Rand, seen map[*node]*node) *node {
	if c := seen[n]; c != nil {
		return c
	}
	c := &node{mode: n.mode, modTime: n.modTime, truncTo: -1}
	seen[n] = c
	if !n.isDir() {
		c.data = survivor(n, r)
		c.synced, c.clean = bytes.Clone(c.data), len(c.data)
		return c
	}
	c.entries = map[string]*node{}
	// Sorted, so that the same seed draws the same clone.
	for _, name := range slices.Sorted(maps.Keys(n.durable)) {
		c.entries[name] = crashNode(n.durable[name], r, seen)
	}
	c.durable = maps.Clone(c.entries)
	return c
}

// survivor returns the bytes of file n after a power loss.
func survivor(n *node, r *rand.Rand) []byte {
	base := n.synced
	if r == nil {
		return bytes.Clone(base)
	}
	if n.truncTo >= 0 && r.IntN(2) == 0 {
		base = base[:n.truncTo]
	}
	out := bytes.Clone(base)
	extra := len(n.data) - len(base)
	if extra <= 0 {
		return out
	}
	// Nothing and everything are what disks most often leave, and the
	// cases recovery most needs to get right, so weight them.
	var k int
	switch r.IntN(3) {
	case 1:
		k = extra
	case 2:
		k = r.IntN(extra + 1)
	}
	out = append(out, n.data[len(base):len(base)+k]...)
	if k > 0 && r.IntN(4) == 0 {
		i := r.IntN(k)
		torn := out[len(base)+i : len(base)+i+1+r.IntN(k-i)]
		if r.IntN(2) == 0 {
			clear(torn)
		} else {
			for j := range torn {
				torn[j] = byte(r.Uint32())
			}
		}
	}
	return out
}

func (n *node) info(name string) fs.FileInfo {
	return &fileInfo{name: name, size: int64(len(n.data)), mode: n.mode, modTime: n.modTime}
}

func (n *node) write(p []byte, off int64) {
	if len(p) == 0 {
		return
	}
	end := int(off) + len(p)
	if l := len(n.data); end > l {
		n.data = slices.Grow(n.data, end-l)[:end]
		clear(n.data[l:]) // stale bytes from before a truncation may linger
	}
	copy(n.data[off:], p)
	n.clean = min(n.clean, int(off))
	n.modTime = time.Now()
}

func (n *node) truncate(size int) {
	if size < len(n.synced) && (n.truncTo < 0 || size < n.truncTo) {
		n.truncTo = size
	}
	if l := len(n.data); size > l {
		n.data = slices.Grow(n.data, size-l)[:size]
		clear(n.data[l:])
	}
	n.data = n.data[:size]
	n.clean = min(n.clean, size)
	n.modTime = time.Now()
}

// memFile is an open MemFS file. Its fields other than fs, n, name and flag
// are guarded by fs.mu.
type memFile struct {
	fs     *MemFS
	n      *node
	name   string
	flag   int
	off    int64
	closed bool
}

// check fails an operation on a closed file or one the open flags forbid.
func (f *memFile) check(op string, read, write bool) error {
	acc := f.flag & (os.O_RDONLY | os.O_WRONLY | os.O_RDWR)
	switch {
	case f.closed:
		return pathErr(op, f.name, fs.ErrClosed)
	case read && acc == os.O_WRONLY, write && acc == os.O_RDONLY:
		return pathErr(op, f.name, syscall.EBADF)
	}
	return nil
}

func (f *memFile) Name() string { return f.name }

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	f.fs.mu.RLock()
	defer f.fs.mu.RUnlock()
	if err := f.check("read", true, false); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, pathErr("readat", f.name, errors.New("negative offset"))
	}
	var n int
	if off < int64(len(f.n.data)) {
		n = copy(p, f.n.data[off:])
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("write", false, true); err != nil {
		return 0, err
	}
	if f.flag&os.O_APPEND != 0 {
		// As os does: the kernel would silently append instead.
		return 0, errors.New("os: invalid use of WriteAt on file opened with O_APPEND")
	}
	if off < 0 {
		return 0, pathErr("writeat", f.name, errors.New("negative offset"))
	}
	f.n.write(p, off)
	return len(p), nil
}

func (f *memFile) Write(p []byte) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("write", false, true); err != nil {
		return 0, err
	}
	if f.flag&os.O_APPEND != 0 {
		f.off = int64(len(f.n.data))
	}
	f.n.write(p, f.off)
	f.off += int64(len(p))
	return len(p), nil
}

func (f *memFile) Sync() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("sync", false, false); err != nil {
		return err
	}
	f.n.sync()
	return nil
}

// sync makes a file's current bytes its durable ones.
func (n *node) sync() {
	n.synced = append(n.synced[:n.clean], n.data[n.clean:]...)
	n.clean, n.truncTo = len(n.data), -1
}

func (f *memFile) Truncate(size int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("truncate", false, true); err != nil {
		return err
	}
	if size < 0 {
		return pathErr("truncate", f.name, syscall.EINVAL)
	}
	f.n.truncate(int(size))
	return nil
}

func (f *memFile) Stat() (fs.FileInfo, error) {
	f.fs.mu.RLock()
	defer f.fs.mu.RUnlock()
	if err := f.check("stat", false, false); err != nil {
		return nil, err
	}
	return f.n.info(filepath.Base(f.name)), nil
}

func (f *memFile) Close() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("close", false, false); err != nil {
		return err
	}
	f.closed = true
	return nil
}

type fileInfo struct {
	name    string
	size    int64
	mode    fs.FileMode
	modTime time.Time
}

func (i *fileInfo) Name() string       { return i.name }
func (i *fileInfo) Size() int64        { return i.size }
func (i *fileInfo) Mode() fs.FileMode  { return i.mode }
func (i *fileInfo) ModTime() time.Time { return i.modTime }
func (i *fileInfo) IsDir() bool        { return i.mode.IsDir() }
func (i *fileInfo) Sys() any           { return nil }
