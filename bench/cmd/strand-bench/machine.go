package main

import (
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"
	"time"
)

// machineLimits is what this machine allows, measured in the same run as
// the brokers: the ceilings a broker's throughput is read against.
type machineLimits struct {
	// One TCP stream over loopback, 1 MiB writes, reader discarding.
	LoopbackMBPerSec float64 `json:"loopback_tcp_mb_per_sec"`
	// Sequential 1 MiB writes to a new file, fsync after each, in the
	// directory the brokers keep their data in.
	WriteFsyncMBPerSec float64 `json:"write_fsync_mb_per_sec"`
	// 4 KiB appends, fsync after each: the rate of small durable writes.
	SmallFsyncsPerSec float64 `json:"small_fsyncs_per_sec"`
	// Sequential 1 MiB writes without fsync (the page cache).
	BufferedWriteMBPerSec float64 `json:"buffered_write_mb_per_sec"`
	FileSystem            string  `json:"file_system"`
	// Memory touched once before the first broker (see warmMemory), and
	// how long that took: seconds per GiB well above a few tenths mean the
	// machine had not used that memory since it booted.
	WarmedGiB     float64 `json:"warmed_gib,omitempty"`
	WarmedSeconds float64 `json:"warmed_seconds,omitempty"`
}

// warmMemory touches up to max bytes of the machine's free memory once and
// gives it back. On a virtual machine, the first use of a page since boot
// costs a fault on the host: on the one this was written on, touching
// memory never used took 2.7 s of system time per GiB, and 0.7 s once it
// had been used. Page-cache growth pays the same, so whichever broker first
// writes more than the memory used so far is slowed in the middle of its
// workload. Touching the memory first puts every broker on the same
// footing.
func warmMemory(max int64) (gib, seconds float64) {
	avail := memAvailable()
	n := min(max, avail/2) &^ (1<<30 - 1)
	start := time.Now()
	chunks := make([][]byte, 0, n>>30)
	for range n >> 30 {
		b := make([]byte, 1<<30)
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1
		}
		chunks = append(chunks, b)
	}
	chunks = nil
	debug.FreeOSMemory()
	return float64(n) / (1 << 30), time.Since(start).Seconds()
}

// memAvailable is MemAvailable from /proc/meminfo, or 0.
func memAvailable() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "MemAvailable:"); ok {
			var kb int64
			fmt.Sscanf(strings.TrimSpace(rest), "%d", &kb)
			return kb << 10
		}
	}
	return 0
}

func measureMachine(dir string, d time.Duration) (machineLimits, error) {
	var m machineLimits
	var err error
	m.FileSystem = fsType(dir)
	if m.LoopbackMBPerSec, err = loopbackThroughput(d); err != nil {
		return m, fmt.Errorf("loopback: %w", err)
	}
	if m.WriteFsyncMBPerSec, err = writeThroughput(dir, d, 1<<20, true, 1<<30); err != nil {
		return m, fmt.Errorf("write+fsync: %w", err)
	}
	var small float64
	if small, err = writeThroughput(dir, d, 4096, true, 1<<30); err != nil {
		return m, fmt.Errorf("small write+fsync: %w", err)
	}
	m.SmallFsyncsPerSec = small * 1e6 / 4096
	if m.BufferedWriteMBPerSec, err = writeThroughput(dir, d, 1<<20, false, 2<<30); err != nil {
		return m, fmt.Errorf("buffered write: %w", err)
	}
	return m, nil
}

func loopbackThroughput(d time.Duration) (float64, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	got := make(chan int64, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- -1
			return
		}
		defer c.Close()
		n, _ := io.CopyBuffer(io.Discard, c, make([]byte, 1<<20))
		got <- n
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		return 0, err
	}
	buf := make([]byte, 1<<20)
	start := time.Now()
	for time.Since(start) < d {
		if _, err := c.Write(buf); err != nil {
			c.Close()
			return 0, err
		}
	}
	c.Close()
	n := <-got
	return float64(n) / 1e6 / time.Since(start).Seconds(), nil
}

func writeThroughput(dir string, d time.Duration, block int, sync bool, maxBytes int64) (float64, error) {
	f, err := os.CreateTemp(dir, "bench-disk-*")
	if err != nil {
		return 0, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	buf := make([]byte, block)
	for i := range buf {
		buf[i] = byte(i*7 + 1)
	}
	var n int64
	start := time.Now()
	for time.Since(start) < d && n < maxBytes {
		if _, err := f.Write(buf); err != nil {
			return 0, err
		}
		n += int64(block)
		if sync {
			if err := f.Sync(); err != nil {
				return 0, err
			}
		}
	}
	el := time.Since(start).Seconds()
	return float64(n) / 1e6 / el, nil
}

// fsType names the file system under dir (a tmpfs makes fsync free and
// the durable columns meaningless).
func fsType(dir string) string {
	var st syscall.Statfs_t
	if err := syscall.Statfs(filepath.Clean(dir), &st); err != nil {
		return "unknown"
	}
	switch st.Type {
	case 0x01021994:
		return "tmpfs"
	case 0xEF53:
		return "ext4"
	case 0x58465342:
		return "xfs"
	case 0x9123683E:
		return "btrfs"
	case 0x794c7630:
		return "overlayfs"
	}
	return fmt.Sprintf("0x%x", st.Type)
}
