package server

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/strandlog/strand/internal/log/vfs"
	"github.com/strandlog/strand/internal/replica"
)

// TestCopySection: a section copied rather than sent with sendfile arrives
// whole, across several buffers, and a file shorter than the section is an
// error, not a short write under a frame size that counts the missing
// bytes.
func TestCopySection(t *testing.T) {
	mem := vfs.NewMem()
	f, err := mem.OpenFile("/seg.log", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("0123456789abcdef"), 10_000) // 160 KB: three buffers
	if _, err := f.WriteAt(data, 0); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := copySection(&out, replica.Section{File: f, Pos: 7, Size: int64(len(data)) - 10}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Bytes(), data[7:len(data)-3]) {
		t.Fatalf("copied %d bytes, not the section's %d", out.Len(), len(data)-10)
	}
	err = copySection(io.Discard, replica.Section{File: f, Pos: 100, Size: int64(len(data))})
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("section past the file's end: %v, want ErrUnexpectedEOF", err)
	}
}

// TestSendBuffer: socket.send.buffer.bytes sets a client connection's
// SO_SNDBUF (the kernel reports twice the value asked for); -1 leaves the
// system's.
func TestSendBuffer(t *testing.T) {
	for _, ask := range []int32{256 << 10, -1} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		client, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		server, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		before := sndbuf(t, server)
		setSendBuffer(server, ask)
		got := sndbuf(t, server)
		switch {
		case ask > 0 && got != 2*int(ask):
			t.Errorf("asked for %d: SO_SNDBUF %d, want %d", ask, got, 2*ask)
		case ask < 0 && got != before:
			t.Errorf("-1 changed SO_SNDBUF from %d to %d", before, got)
		}
		client.Close()
		server.Close()
		ln.Close()
	}
}

func sndbuf(t *testing.T, nc net.Conn) int {
	t.Helper()
	raw, err := nc.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var v int
	var gerr error
	if err := raw.Control(func(fd uintptr) { v, gerr = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_SNDBUF) }); err != nil {
		t.Fatal(err)
	}
	if gerr != nil {
		t.Fatal(gerr)
	}
	return v
}
