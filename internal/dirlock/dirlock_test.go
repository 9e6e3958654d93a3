package dirlock

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestSecondAcquireFails: while a directory is held, a second Acquire in
// the same process fails at once and names the holder's pid; once
// released, the directory can be taken again, and a kept .lock file with
// a dead holder's pid in it does not stand in the way.
func TestSecondAcquireFails(t *testing.T) {
	dir := t.TempDir()
	// As a broker killed with -9 leaves it.
	if err := os.WriteFile(filepath.Join(dir, FileName), []byte("999999999\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	first, err := Acquire(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Acquire(dir)
	var held *HeldError
	if !errors.As(err, &held) {
		t.Fatalf("second Acquire: %v, want a HeldError", err)
	}
	if held.Dir != dir || held.PID != os.Getpid() {
		t.Errorf("HeldError %+v, want dir %s and pid %d", held, dir, os.Getpid())
	}
	if msg := err.Error(); !strings.Contains(msg, dir) || !strings.Contains(msg, strconv.Itoa(os.Getpid())) {
		t.Errorf("error %q names neither the directory nor the pid", msg)
	}
	if err := first.Release(); err != nil {
		t.Fatal(err)
	}
	if err := first.Release(); err != nil {
		t.Errorf("second Release: %v", err)
	}
	again, err := Acquire(dir)
	if err != nil {
		t.Fatalf("Acquire after Release: %v", err)
	}
	again.Release()
}

// TestAcquireAcrossProcesses: a lock taken by another process refuses
// this one, naming that process; when it exits the lock is free.
func TestAcquireAcrossProcesses(t *testing.T) {
	flock, err := exec.LookPath("flock")
	if err != nil {
		t.Skip("no flock(1) to hold the lock from another process")
	}
	dir := t.TempDir()
	// flock(1) takes the same kind of lock on the file; the shell writes
	// its pid as a holder does, then waits for its standard input to end.
	holder := exec.Command(flock, filepath.Join(dir, FileName), "sh", "-c", `echo $$ > "$0"; echo locked; cat >/dev/null`, filepath.Join(dir, FileName))
	stdin, err := holder.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := holder.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, len("locked\n"))
	if _, err := out.Read(buf); err != nil || string(buf) != "locked\n" {
		t.Fatalf("holder: %q %v", buf, err)
	}
	_, err = Acquire(dir)
	var held *HeldError
	if !errors.As(err, &held) || held.PID <= 0 || held.PID == os.Getpid() {
		t.Fatalf("Acquire while another process holds it: %v, want a HeldError naming that process", err)
	}
	stdin.Close()
	if err := holder.Wait(); err != nil {
		t.Fatal(err)
	}
	l, err := Acquire(dir)
	if err != nil {
		t.Fatalf("Acquire after the holder exited: %v", err)
	}
	l.Release()
}
