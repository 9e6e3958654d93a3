package server

import (
	"bytes"
	"errors"
	"io"
	"os"
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
