package raft

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
)

// raftLogger hands etcd's Raft log lines to slog. Raft's Info lines (every
// vote, every term change) go out at Debug; this package logs the events
// that matter (leader changes, snapshots, membership) at Info itself.
//
// etcd's lines name members by Raft id, always through a %x verb (as in
// "%x became leader at term %d"); the formatted methods print those as the
// ids the rest of the system knows (Config.LogID) instead, so that no log
// line names a node by a number that means another node elsewhere.
type raftLogger struct {
	l     *slog.Logger
	logID func(id uint64) int64
}

func (r raftLogger) Debug(v ...any) { r.l.Debug(fmt.Sprint(v...)) }
func (r raftLogger) Debugf(format string, v ...any) {
	r.l.Debug(r.sprintf(format, v))
}
func (r raftLogger) Info(v ...any)                 { r.l.Debug(fmt.Sprint(v...)) }
func (r raftLogger) Infof(format string, v ...any) { r.l.Debug(r.sprintf(format, v)) }
func (r raftLogger) Warning(v ...any)              { r.l.Warn(fmt.Sprint(v...)) }
func (r raftLogger) Warningf(format string, v ...any) {
	r.l.Warn(r.sprintf(format, v))
}
func (r raftLogger) Error(v ...any)                 { r.l.Error(fmt.Sprint(v...)) }
func (r raftLogger) Errorf(format string, v ...any) { r.l.Error(r.sprintf(format, v)) }

// Fatal panics rather than exiting: a library does not end the process.
func (r raftLogger) Fatal(v ...any) { r.Panic(v...) }
func (r raftLogger) Fatalf(format string, v ...any) {
	r.Panicf(format, v...)
}

func (r raftLogger) Panic(v ...any) {
	s := fmt.Sprint(v...)
	r.l.Error(s)
	panic(s)
}

func (r raftLogger) Panicf(format string, v ...any) {
	s := r.sprintf(format, v)
	r.l.Error(s)
	panic(s)
}

// sprintf formats an etcd line, each plain %x verb of a uint64 (a Raft id)
// printed as the member's log id in decimal.
func (r raftLogger) sprintf(format string, v []any) string {
	if r.logID == nil || !strings.Contains(format, "%x") {
		return fmt.Sprintf(format, v...)
	}
	var b strings.Builder
	args := slices.Clone(v)
	arg := 0
	for i := 0; i < len(format); i++ {
		b.WriteByte(format[i])
		if format[i] != '%' {
			continue
		}
		j := i + 1 // past the flags, width and precision, to the verb
		for j < len(format) && strings.IndexByte("+-# 0123456789.", format[j]) >= 0 {
			j++
		}
		if j == len(format) {
			break
		}
		if format[j] == '%' {
			b.WriteByte('%')
			i = j
			continue
		}
		if id, ok := argAt(args, arg).(uint64); ok && format[j] == 'x' && j == i+1 {
			args[arg] = r.logID(id)
			b.WriteByte('d')
		} else {
			b.WriteString(format[i+1 : j+1])
		}
		i = j
		arg++
	}
	return fmt.Sprintf(b.String(), args...)
}

func argAt(v []any, i int) any {
	if i < len(v) {
		return v[i]
	}
	return nil
}

// logIDs is ids as log lines name them.
func logIDs(logID func(uint64) int64, ids []uint64) []int64 {
	out := make([]int64, len(ids))
	for i, id := range ids {
		out[i] = logID(id)
	}
	return out
}
