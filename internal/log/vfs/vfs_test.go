package vfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

const (
	create = os.O_RDWR | os.O_CREATE
	excl   = os.O_RDWR | os.O_CREATE | os.O_EXCL
)

// impls are the FSs the shared suite runs over, each with a directory to
// work in.
var impls = []struct {
	name  string
	setup func(t *testing.T) (FS, string)
}{
	{"os", func(t *testing.T) (FS, string) { return OS, t.TempDir() }},
	{"mem", func(t *testing.T) (FS, string) {
		m := NewMem()
		must(t, m.MkdirAll("/data", 0o755))
		return m, "/data"
	}},
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func open(t *testing.T, fsys FS, name string, flag int) File {
	t.Helper()
	f, err := fsys.OpenFile(name, flag, 0o644)
	must(t, err)
	t.Cleanup(func() { f.Close() })
	return f
}

func write(t *testing.T, f File, s string) {
	t.Helper()
	if n, err := f.Write([]byte(s)); err != nil || n != len(s) {
		t.Fatalf("Write(%q) = %d, %v", s, n, err)
	}
}

// content reads a whole file through a fresh handle.
func content(t *testing.T, fsys FS, name string) string {
	t.Helper()
	f, err := fsys.OpenFile(name, os.O_RDONLY, 0)
	must(t, err)
	defer f.Close()
	fi, err := f.Stat()
	must(t, err)
	b := make([]byte, fi.Size())
	if _, err := f.ReadAt(b, 0); err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func wantContent(t *testing.T, fsys FS, name, want string) {
	t.Helper()
	if got := content(t, fsys, name); got != want {
		t.Errorf("%s holds %q, want %q", name, got, want)
	}
}

func wantNotExist(t *testing.T, fsys FS, name string) {
	t.Helper()
	if _, err := fsys.Stat(name); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Stat(%s) = %v, want ErrNotExist", name, err)
	}
}

func names(t *testing.T, fsys FS, dir string) []string {
	t.Helper()
	list, err := fsys.ReadDir(dir)
	must(t, err)
	var out []string
	for _, e := range list {
		out = append(out, e.Name())
	}
	return out
}

var shared = []struct {
	name string
	run  func(t *testing.T, fsys FS, dir string)
}{
	{"create excl trunc", func(t *testing.T, fsys FS, dir string) {
		name := filepath.Join(dir, "a")
		if _, err := fsys.OpenFile(name, os.O_RDWR, 0); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("open missing: %v, want ErrNotExist", err)
		}
		if _, err := fsys.OpenFile(filepath.Join(dir, "no", "a"), create, 0o644); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("create in missing dir: %v, want ErrNotExist", err)
		}
		var pe *fs.PathError
		if _, err := fsys.OpenFile(name, os.O_RDONLY, 0); !errors.As(err, &pe) {
			t.Errorf("open missing: %T, want *fs.PathError", err)
		}
		write(t, open(t, fsys, name, excl), "hello")
		if _, err := fsys.OpenFile(name, excl, 0o644); !errors.Is(err, fs.ErrExist) {
			t.Errorf("O_EXCL on existing file: %v, want ErrExist", err)
		}
		open(t, fsys, name, create) // no O_TRUNC: keeps the content
		wantContent(t, fsys, name, "hello")
		open(t, fsys, name, create|os.O_TRUNC)
		wantContent(t, fsys, name, "")
	}},
	{"write read", func(t *testing.T, fsys FS, dir string) {
		name := filepath.Join(dir, "a")
		f := open(t, fsys, name, create)
		write(t, f, "hello ")
		write(t, f, "world")
		b := make([]byte, 5)
		if n, err := f.ReadAt(b, 6); n != 5 || err != nil || string(b) != "world" {
			t.Errorf("ReadAt(6) = %d, %v, %q", n, err, b)
		}
		if n, err := f.ReadAt(b, 8); n != 3 || err != io.EOF || string(b[:n]) != "rld" {
			t.Errorf("ReadAt across the end = %d, %v, %q; want 3, EOF", n, err, b[:n])
		}
		if n, err := f.ReadAt(b, 11); n != 0 || err != io.EOF {
			t.Errorf("ReadAt(end) = %d, %v; want 0, EOF", n, err)
		}
		if n, err := f.WriteAt([]byte("!"), 13); n != 1 || err != nil {
			t.Fatalf("WriteAt past the end = %d, %v", n, err)
		}
		wantContent(t, fsys, name, "hello world\x00\x00!")
		if _, err := f.WriteAt([]byte("H"), 0); err != nil {
			t.Fatal(err)
		}
		write(t, f, "?") // the offset is unaffected by WriteAt
		wantContent(t, fsys, name, "Hello world?\x00!")

		a := open(t, fsys, name, os.O_WRONLY|os.O_APPEND)
		write(t, a, "$")
		wantContent(t, fsys, name, "Hello world?\x00!$")
		if _, err := a.WriteAt([]byte("x"), 0); err == nil {
			t.Error("WriteAt on an O_APPEND file succeeded")
		}
		if _, err := a.ReadAt(b, 0); err == nil {
			t.Error("ReadAt on an O_WRONLY file succeeded")
		}
		r := open(t, fsys, name, os.O_RDONLY)
		if _, err := r.Write([]byte("x")); err == nil {
			t.Error("Write on an O_RDONLY file succeeded")
		}
	}},
	{"truncate", func(t *testing.T, fsys FS, dir string) {
		name := filepath.Join(dir, "a")
		f := open(t, fsys, name, create)
		write(t, f, "abcdef")
		must(t, f.Truncate(3))
		wantContent(t, fsys, name, "abc")
		must(t, f.Truncate(5))
		wantContent(t, fsys, name, "abc\x00\x00")
		if _, err := f.WriteAt([]byte("Z"), 6); err != nil {
			t.Fatal(err)
		}
		wantContent(t, fsys, name, "abc\x00\x00\x00Z") // no stale "f" at 5
	}},
	{"rename", func(t *testing.T, fsys FS, dir string) {
		a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
		write(t, open(t, fsys, a, create), "new")
		write(t, open(t, fsys, b, create), "old")
		must(t, fsys.Rename(a, b))
		wantNotExist(t, fsys, a)
		wantContent(t, fsys, b, "new")
		if err := fsys.Rename(a, b); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("rename missing: %v, want ErrNotExist", err)
		}
		sub := filepath.Join(dir, "sub")
		must(t, fsys.MkdirAll(sub, 0o755))
		must(t, fsys.Rename(b, filepath.Join(sub, "c")))
		wantContent(t, fsys, filepath.Join(sub, "c"), "new")
		if err := fsys.Rename(filepath.Join(sub, "c"), sub); err == nil {
			t.Error("renaming a file over a directory succeeded")
		}
	}},
	{"remove", func(t *testing.T, fsys FS, dir string) {
		sub := filepath.Join(dir, "sub", "deeper")
		must(t, fsys.MkdirAll(sub, 0o755))
		a := filepath.Join(sub, "a")
		open(t, fsys, a, create)
		if err := fsys.Remove(sub); err == nil {
			t.Error("Remove of a non-empty directory succeeded")
		}
		must(t, fsys.Remove(a))
		wantNotExist(t, fsys, a)
		if err := fsys.Remove(a); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("second Remove: %v, want ErrNotExist", err)
		}
		open(t, fsys, a, create)
		must(t, fsys.RemoveAll(filepath.Join(dir, "sub")))
		wantNotExist(t, fsys, filepath.Join(dir, "sub"))
		must(t, fsys.RemoveAll(filepath.Join(dir, "sub")))
		must(t, fsys.MkdirAll(sub, 0o755))
		must(t, fsys.Remove(sub))
	}},
	{"readdir stat", func(t *testing.T, fsys FS, dir string) {
		for _, n := range []string{"c.log", "a.log", "b.index"} {
			write(t, open(t, fsys, filepath.Join(dir, n), create), n)
		}
		must(t, fsys.MkdirAll(filepath.Join(dir, "d"), 0o755))
		if got, want := names(t, fsys, dir), []string{"a.log", "b.index", "c.log", "d"}; !slices.Equal(got, want) {
			t.Errorf("ReadDir = %v, want %v", got, want)
		}
		list, err := fsys.ReadDir(dir)
		must(t, err)
		if list[0].IsDir() || !list[3].IsDir() {
			t.Errorf("IsDir wrong in %v", list)
		}
		if _, err := fsys.ReadDir(filepath.Join(dir, "nope")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("ReadDir missing: %v", err)
		}
		fi, err := fsys.Stat(filepath.Join(dir, "b.index"))
		must(t, err)
		if fi.Name() != "b.index" || fi.Size() != 7 || fi.IsDir() || !fi.Mode().IsRegular() || fi.ModTime().IsZero() {
			t.Errorf("Stat = %s %d %v %v %v", fi.Name(), fi.Size(), fi.IsDir(), fi.Mode(), fi.ModTime())
		}
		f := open(t, fsys, filepath.Join(dir, "a.log"), os.O_RDWR)
		must(t, f.Truncate(2))
		if fi, err := f.Stat(); err != nil || fi.Name() != "a.log" || fi.Size() != 2 {
			t.Errorf("File.Stat = %v, %v", fi, err)
		}
		if fi, err := fsys.Stat(filepath.Join(dir, "d")); err != nil || !fi.IsDir() || fi.Name() != "d" {
			t.Errorf("Stat(dir) = %v, %v", fi, err)
		}
		if f.Name() != filepath.Join(dir, "a.log") {
			t.Errorf("Name() = %q", f.Name())
		}
	}},
	{"open handle survives remove and rename", func(t *testing.T, fsys FS, dir string) {
		a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
		f := open(t, fsys, a, create)
		write(t, f, "abc")
		must(t, fsys.Rename(a, b))
		write(t, f, "def")
		wantContent(t, fsys, b, "abcdef")
		must(t, fsys.Remove(b))
		write(t, f, "ghi")
		buf := make([]byte, 9)
		if _, err := f.ReadAt(buf, 0); err != nil || string(buf) != "abcdefghi" {
			t.Errorf("ReadAt after remove = %q, %v", buf, err)
		}
		must(t, f.Sync())
		if fi, err := f.Stat(); err != nil || fi.Size() != 9 {
			t.Errorf("Stat after remove = %v, %v", fi, err)
		}
		wantNotExist(t, fsys, b)
	}},
	{"closed file", func(t *testing.T, fsys FS, dir string) {
		f, err := fsys.OpenFile(filepath.Join(dir, "a"), create, 0o644)
		must(t, err)
		must(t, f.Close())
		_, rerr := f.ReadAt(make([]byte, 1), 0)
		_, werr := f.Write([]byte("x"))
		for _, err := range []error{rerr, werr, f.Sync(), f.Close()} {
			if !errors.Is(err, os.ErrClosed) {
				t.Errorf("after Close: %v, want ErrClosed", err)
			}
		}
	}},
	{"syncdir", func(t *testing.T, fsys FS, dir string) {
		write(t, open(t, fsys, filepath.Join(dir, "a"), create), "x")
		must(t, fsys.SyncDir(dir))
		if err := fsys.SyncDir(filepath.Join(dir, "nope")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("SyncDir missing: %v", err)
		}
	}},
}

func TestShared(t *testing.T) {
	for _, impl := range impls {
		for _, tc := range shared {
			t.Run(impl.name+"/"+tc.name, func(t *testing.T) {
				fsys, dir := impl.setup(t)
				tc.run(t, fsys, dir)
			})
		}
	}
}

func TestOSFileIsOSFile(t *testing.T) {
	f := open(t, OS, filepath.Join(t.TempDir(), "a"), create)
	if _, ok := f.(*os.File); !ok {
		t.Errorf("OS.OpenFile returned %T, want *os.File", f)
	}
	if f, err := OS.OpenFile(filepath.Join(t.TempDir(), "no", "a"), os.O_RDONLY, 0); f != nil || err == nil {
		t.Errorf("failed OpenFile = %#v, %v; want a nil File", f, err)
	}
}

func TestMemPaths(t *testing.T) {
	m := NewMem()
	must(t, m.MkdirAll("x/y", 0o755))
	write(t, open(t, m, "/x/y/a", create), "abc")
	wantContent(t, m, "x/y/a", "abc")
	wantContent(t, m, "./x//y/../y/a", "abc")
	wantContent(t, m, "../x/y/a", "abc")
	if got := names(t, m, "."); !slices.Equal(got, []string{"x"}) {
		t.Errorf("ReadDir(.) = %v", got)
	}
	if err := m.Rename("/x", "/x/y/z"); err == nil {
		t.Error("renaming a directory into itself succeeded")
	}
}

func TestMemConcurrent(t *testing.T) {
	m := NewMem()
	f := open(t, m, "a", create)
	var wg sync.WaitGroup
	for range 8 {
		r := open(t, m, "a", os.O_RDONLY)
		wg.Go(func() {
			b := make([]byte, 4)
			for off := int64(0); off < 4000; off += 4 {
				if n, err := r.ReadAt(b, off); err == nil && string(b[:n]) != "abcd" {
					t.Errorf("ReadAt(%d) = %q", off, b[:n])
				}
			}
		})
	}
	for range 1000 {
		write(t, f, "abcd")
	}
	wg.Wait()
}

// crashSetup returns a MemFS holding /d/a with "synced" durably written,
// then "+unsynced" appended.
func crashSetup(t *testing.T) (*MemFS, File) {
	m := NewMem()
	must(t, m.MkdirAll("/d", 0o755))
	f := open(t, m, "/d/a", create)
	write(t, f, "synced")
	must(t, f.Sync())
	must(t, m.SyncDir("/d"))
	write(t, f, "+unsynced")
	return m, f
}

func TestCrash(t *testing.T) {
	t.Run("synced survives, unsynced is gone", func(t *testing.T) {
		m, f := crashSetup(t)
		c := m.CrashClone(CrashOptions{})
		wantContent(t, c, "/d/a", "synced")
		wantContent(t, m, "/d/a", "synced+unsynced")
		if _, err := f.WriteAt([]byte("S"), 0); err != nil { // an overwrite is no append
			t.Fatal(err)
		}
		wantContent(t, m.CrashClone(CrashOptions{}), "/d/a", "synced")
		must(t, f.Sync())
		wantContent(t, m.CrashClone(CrashOptions{}), "/d/a", "Synced+unsynced")
	})
	t.Run("unsynced file data is gone", func(t *testing.T) {
		m := NewMem()
		write(t, open(t, m, "a", create), "x")
		must(t, m.SyncDir("/"))
		wantContent(t, m.CrashClone(CrashOptions{}), "a", "")
	})
	t.Run("clone is independent and fully durable", func(t *testing.T) {
		m, _ := crashSetup(t)
		c := m.CrashClone(CrashOptions{})
		write(t, open(t, c, "/d/b", create), "in clone")
		f := open(t, c, "/d/a", os.O_WRONLY|os.O_APPEND)
		write(t, f, "!")
		wantNotExist(t, m, "/d/b")
		wantContent(t, m, "/d/a", "synced+unsynced")
		must(t, c.SyncDir("/d"))
		must(t, f.Sync())
		wantContent(t, c.CrashClone(CrashOptions{}), "/d/a", "synced!")
		wantContent(t, c.CrashClone(CrashOptions{}), "/d/b", "")
	})
	t.Run("creation needs SyncDir", func(t *testing.T) {
		m, _ := crashSetup(t)
		f := open(t, m, "/d/b", create)
		write(t, f, "x")
		must(t, f.Sync())
		wantNotExist(t, m.CrashClone(CrashOptions{}), "/d/b")
		must(t, m.SyncDir("/d"))
		wantContent(t, m.CrashClone(CrashOptions{}), "/d/b", "x")
	})
	t.Run("rename needs SyncDir", func(t *testing.T) {
		m, _ := crashSetup(t)
		must(t, m.Rename("/d/a", "/d/b"))
		c := m.CrashClone(CrashOptions{})
		wantNotExist(t, c, "/d/b")
		wantContent(t, c, "/d/a", "synced")
		must(t, m.SyncDir("/d"))
		c = m.CrashClone(CrashOptions{})
		wantNotExist(t, c, "/d/a")
		wantContent(t, c, "/d/b", "synced")
	})
	t.Run("rename across directories needs both", func(t *testing.T) {
		m, _ := crashSetup(t)
		must(t, m.MkdirAll("/e", 0o755))
		must(t, m.Rename("/d/a", "/e/a"))
		must(t, m.SyncDir("/e"))
		c := m.CrashClone(CrashOptions{})
		wantContent(t, c, "/d/a", "synced") // both names: one inode
		wantContent(t, c, "/e/a", "synced")
		must(t, m.SyncDir("/d"))
		wantNotExist(t, m.CrashClone(CrashOptions{}), "/d/a")
	})
	t.Run("removal needs SyncDir", func(t *testing.T) {
		m, _ := crashSetup(t)
		must(t, m.RemoveAll("/d"))
		wantContent(t, m.CrashClone(CrashOptions{}), "/d/a", "synced")
		must(t, m.SyncDir("/"))
		wantNotExist(t, m.CrashClone(CrashOptions{}), "/d")
	})
	t.Run("unsynced truncation", func(t *testing.T) {
		m, f := crashSetup(t)
		must(t, f.Truncate(2))
		write(t, f, "!") // at offset 15: the offset does not follow Truncate
		wantContent(t, m.CrashClone(CrashOptions{}), "/d/a", "synced")
		seen := map[bool]bool{}
		for seed := range uint64(50) {
			got := content(t, m.CrashClone(CrashOptions{Rand: rand.New(rand.NewPCG(seed, 0))}), "/d/a")
			kept := strings.HasPrefix(got, "synced")
			if !kept && !strings.HasPrefix(got, "sy") {
				t.Fatalf("seed %d: %q", seed, got)
			}
			seen[kept] = true
		}
		if !seen[true] || !seen[false] {
			t.Errorf("truncation always or never survived: %v", seen)
		}
	})
}

func TestCrashRand(t *testing.T) {
	m, _ := crashSetup(t)
	current := content(t, m, "/d/a")
	lens, torn := map[int]bool{}, false
	for seed := range uint64(200) {
		r := rand.New(rand.NewPCG(seed, seed))
		got := content(t, m.CrashClone(CrashOptions{Rand: r}), "/d/a")
		if !strings.HasPrefix(got, "synced") || len(got) > len(current) {
			t.Fatalf("seed %d: clone holds %q; synced %q, current %q", seed, got, "synced", current)
		}
		lens[len(got)] = true
		torn = torn || !strings.HasPrefix(current, got)
		again := content(t, m.CrashClone(CrashOptions{Rand: rand.New(rand.NewPCG(seed, seed))}), "/d/a")
		if again != got {
			t.Fatalf("seed %d: clones differ: %q, %q", seed, got, again)
		}
	}
	if !lens[len("synced")] || !lens[len(current)] || len(lens) < 4 || !torn {
		t.Errorf("too little variety: lengths %v, torn %v", slices.Sorted(maps.Keys(lens)), torn)
	}
}

var errInjected = errors.New("injected")

func TestErrorFS(t *testing.T) {
	m := NewMem()
	must(t, m.MkdirAll("/d", 0o755))
	var logWrites int
	var calls []string
	efs := NewErrorFS(m, func(op Op, name string) error {
		calls = append(calls, fmt.Sprint(op, " ", name))
		if op == OpWrite && strings.HasSuffix(name, ".log") {
			if logWrites++; logWrites == 3 {
				return errInjected
			}
		}
		if op == OpSync && name == "/d/b.index" {
			return errInjected
		}
		return nil
	})
	l := open(t, efs, "/d/a.log", create)
	x := open(t, efs, "/d/b.index", create)
	write(t, l, "1")
	write(t, l, "2")
	write(t, x, "x")
	if _, err := l.Write([]byte("3")); !errors.Is(err, errInjected) {
		t.Errorf("third write: %v, want injected", err)
	}
	if _, err := l.WriteAt([]byte("4"), 2); err != nil {
		t.Errorf("fourth write: %v", err)
	}
	wantContent(t, m, "/d/a.log", "124") // the failed write wrote nothing
	must(t, l.Sync())
	var pe *fs.PathError
	if err := x.Sync(); !errors.Is(err, errInjected) || !errors.As(err, &pe) || pe.Op != "sync" {
		t.Errorf("Sync: %v, want injected in a PathError", err)
	}

	calls = nil
	x.ReadAt(make([]byte, 1), 0)
	x.Truncate(0)
	x.Stat()
	x.Close()
	efs.Stat("/d/a.log")
	efs.ReadDir("/d")
	efs.Rename("/d/a.log", "/d/c.log")
	efs.SyncDir("/d")
	efs.MkdirAll("/e", 0o755)
	efs.Remove("/e")
	efs.RemoveAll("/d")
	want := []string{"read /d/b.index", "truncate /d/b.index", "stat /d/b.index", "close /d/b.index",
		"stat /d/a.log", "readdir /d", "rename /d/a.log", "syncdir /d", "mkdir /e", "remove /e", "remove /d"}
	if !slices.Equal(calls, want) {
		t.Errorf("injector saw\n%q\nwant\n%q", calls, want)
	}
}

func TestErrorFSFailedOpsDoNothing(t *testing.T) {
	m := NewMem()
	failAll := NewErrorFS(m, func(Op, string) error { return errInjected })
	if _, err := failAll.OpenFile("a", create, 0o644); !errors.Is(err, errInjected) {
		t.Errorf("OpenFile: %v", err)
	}
	wantNotExist(t, m, "a")
	if err := failAll.MkdirAll("d", 0o755); !errors.Is(err, errInjected) {
		t.Errorf("MkdirAll: %v", err)
	}
	wantNotExist(t, m, "d")

	// A failing Close still closes: the descriptor must not leak.
	failClose := NewErrorFS(OS, func(op Op, _ string) error {
		if op == OpClose {
			return errInjected
		}
		return nil
	})
	f, err := failClose.OpenFile(filepath.Join(t.TempDir(), "a"), create, 0o644)
	must(t, err)
	if err := f.Close(); !errors.Is(err, errInjected) {
		t.Errorf("Close: %v", err)
	}
	if _, err := f.(*errorFile).File.Write([]byte("x")); !errors.Is(err, os.ErrClosed) {
		t.Errorf("inner file after failed Close: %v, want ErrClosed", err)
	}
	if err := NewErrorFS(m, nil).MkdirAll("ok", 0o755); err != nil {
		t.Errorf("nil injector: %v", err)
	}
}

func TestOpString(t *testing.T) {
	if OpSyncDir.String() != "syncdir" || OpClose.String() != "close" || Op(99).String() != "Op(99)" {
		t.Error(OpSyncDir, OpClose, Op(99))
	}
}
