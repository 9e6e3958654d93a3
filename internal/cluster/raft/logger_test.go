package raft

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// TestLoggerNamesLogIDs: etcd's lines name members by Raft id through %x;
// they come out as the ids the rest of the system knows, and nothing else
// in them changes.
func TestLoggerNamesLogIDs(t *testing.T) {
	var out bytes.Buffer
	r := raftLogger{slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug})),
		func(id uint64) int64 { return int64(id) - 1 }}
	for _, c := range []struct {
		format string
		args   []any
		want   string
	}{
		{"%x became leader at term %d", []any{uint64(3), uint64(7)}, "2 became leader at term 7"},
		{"%x [term: %d] received a %s message with higher term from %x [term: %d]",
			[]any{uint64(1), uint64(4), "MsgVote", uint64(12), uint64(5)},
			"0 [term: 4] received a MsgVote message with higher term from 11 [term: 5]"},
		{"100%% of %x, %08x is not an id", []any{uint64(2), uint64(255)}, "100% of 1, 000000ff is not an id"},
		{"hint %x", []any{"ab"}, "hint 6162"}, // %x of a string stays hex
		{"no ids %d", []any{5}, "no ids 5"},
	} {
		out.Reset()
		r.Warningf(c.format, c.args...)
		if !strings.Contains(out.String(), `msg="`+c.want+`"`) {
			t.Errorf("%q %v: logged %s, want %q", c.format, c.args, out.String(), c.want)
		}
	}
}
