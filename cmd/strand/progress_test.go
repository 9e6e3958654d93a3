package main

import (
	"strings"
	"testing"
	"time"

	"github.com/strandlog/strand/internal/testutil"
)

// TestProgress: the count is rewritten on one line and cleared at the
// end; nothing is shown where output is not a terminal.
func TestProgress(t *testing.T) {
	var out testutil.SyncBuffer
	p := newProgress(&out, "records written", 5*time.Millisecond)
	p.add(41)
	p.add(1)
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(out.String(), "42 records written"); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no progress line: %q", out.String())
		}
	}
	p.end()
	p.end()
	if s := out.String(); !strings.HasPrefix(s, "\r\033[K") || !strings.HasSuffix(s, "\r\033[K") {
		t.Fatalf("the line is not rewritten and cleared: %q", s)
	}
	if startProgress(&out, "x") != nil {
		t.Fatal("progress shown on a buffer")
	}
	var none *progress
	none.add(1)
	none.end()
}
