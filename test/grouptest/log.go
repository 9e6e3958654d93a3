// Package grouptest drives and checks consumer groups in Strand's tests:
// the line format every group consumer of the test suite prints (the Java
// helper's group-consume mode, test/python/group_consume.py and the
// franz-go Consumer here), a continuous keyed Producer, and Check, which
// accounts for every produced record from the consumers' own logs.
// ProcMember is a member in a process of its own (the Java helper, Python,
// kcat), whose standard output is its log.
//
// It is imported by test/compat and test/link (real binary, real clients)
// and by internal/server's in-process tests, which can also cross-check
// the broker's rebalance history.
//
// # The log format
//
// One event per line, fields separated by single spaces; times are
// microseconds since the Unix epoch; the topic is implied (one per group):
//
//	assigned TIME P,P,...     partitions added to the consumer's assignment ("-": none)
//	revoked TIME P,P,...      partitions taken away after a clean revoke
//	lost TIME P,P,...         partitions lost without a revoke (no commit was possible)
//	processed P O KEY VALUE   a record handed to the application
//	committed TIME P:O,P:O    a successful commit; O is the next offset to process
//	commitfailed TIME ERROR   a failed commit
//	closed TIME               the consumer left cleanly
//
// A consumer prints (and flushes) its processed lines before it sends the
// commit that covers them, so a killed consumer's log never shows a commit
// of records it does not show processed. Other lines are ignored.
package grouptest

import (
	"bufio"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Kind is an event's kind, the first word of its line.
type Kind string

const (
	Assigned     Kind = "assigned"
	Revoked      Kind = "revoked"
	Lost         Kind = "lost"
	Processed    Kind = "processed"
	Committed    Kind = "committed"
	CommitFailed Kind = "commitfailed"
	Closed       Kind = "closed"
)

// Event is one parsed line.
type Event struct {
	Kind       Kind
	Time       time.Time // zero for processed
	Partitions []int32   // assigned, revoked, lost
	Partition  int32     // processed
	Offset     int64     // processed
	Key, Value string    // processed
	Offsets    map[int32]int64
	Detail     string // commitfailed
}

// Log is a consumer's events, in the order it printed them.
type Log struct {
	Name   string
	Events []Event
}

// FormatParts formats a partition list as the log does.
func FormatParts(ps []int32) string {
	if len(ps) == 0 {
		return "-"
	}
	ps = slices.Clone(ps)
	slices.Sort(ps)
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = strconv.Itoa(int(p))
	}
	return strings.Join(s, ",")
}

// FormatOffsets formats committed offsets as the log does.
func FormatOffsets(offs map[int32]int64) string {
	ps := make([]int32, 0, len(offs))
	for p := range offs {
		ps = append(ps, p)
	}
	slices.Sort(ps)
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = fmt.Sprintf("%d:%d", p, offs[p])
	}
	return strings.Join(s, ",")
}

// Micros is t as the log writes it.
func Micros(t time.Time) string { return strconv.FormatInt(t.UnixMicro(), 10) }

// Parse reads a log; lines it does not know are skipped.
func Parse(name, text string) *Log {
	l := &Log{Name: name}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if e, ok := ParseLine(sc.Text()); ok {
			l.Events = append(l.Events, e)
		}
	}
	return l
}

// ParseLine parses one line of the format.
func ParseLine(line string) (Event, bool) {
	f := strings.Fields(line)
	if len(f) < 2 {
		return Event{}, false
	}
	e := Event{Kind: Kind(f[0])}
	micros := func(s string) (time.Time, bool) {
		n, err := strconv.ParseInt(s, 10, 64)
		return time.UnixMicro(n), err == nil
	}
	var ok bool
	switch e.Kind {
	case Assigned, Revoked, Lost:
		if len(f) != 3 {
			return e, false
		}
		if e.Time, ok = micros(f[1]); !ok {
			return e, false
		}
		if f[2] != "-" {
			for _, s := range strings.Split(f[2], ",") {
				p, err := strconv.ParseInt(s, 10, 32)
				if err != nil {
					return e, false
				}
				e.Partitions = append(e.Partitions, int32(p))
			}
		}
	case Processed:
		if len(f) != 5 {
			return e, false
		}
		p, err1 := strconv.ParseInt(f[1], 10, 32)
		o, err2 := strconv.ParseInt(f[2], 10, 64)
		if err1 != nil || err2 != nil {
			return e, false
		}
		e.Partition, e.Offset, e.Key, e.Value = int32(p), o, f[3], f[4]
	case Committed:
		if len(f) != 3 {
			return e, false
		}
		if e.Time, ok = micros(f[1]); !ok {
			return e, false
		}
		e.Offsets = map[int32]int64{}
		for _, s := range strings.Split(f[2], ",") {
			ps, os, _ := strings.Cut(s, ":")
			p, err1 := strconv.ParseInt(ps, 10, 32)
			o, err2 := strconv.ParseInt(os, 10, 64)
			if err1 != nil || err2 != nil {
				return e, false
			}
			e.Offsets[int32(p)] = o
		}
	case CommitFailed, Closed:
		if e.Time, ok = micros(f[1]); !ok {
			return e, false
		}
		e.Detail = strings.Join(f[2:], " ")
	default:
		return e, false
	}
	return e, true
}

// Owned is the consumer's assignment after its last event: what it was
// assigned and has not had revoked or lost since (nothing once closed).
func (l *Log) Owned() []int32 {
	own := map[int32]bool{}
	for _, e := range l.Events {
		switch e.Kind {
		case Assigned:
			for _, p := range e.Partitions {
				own[p] = true
			}
		case Revoked, Lost:
			for _, p := range e.Partitions {
				delete(own, p)
			}
		case Closed:
			clear(own)
		}
	}
	var ps []int32
	for p := range own {
		ps = append(ps, p)
	}
	slices.Sort(ps)
	return ps
}

// Count is how many events of kind k the log has.
func (l *Log) Count(k Kind) int {
	n := 0
	for _, e := range l.Events {
		if e.Kind == k {
			n++
		}
	}
	return n
}

// Has reports whether the log has an event of kind k.
func (l *Log) Has(k Kind) bool { return l.Count(k) > 0 }

// Lines collects a process's output and hands out what it has so far; it
// is an io.Writer safe for concurrent use.
type Lines struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (w *Lines) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

// Printf appends one formatted line.
func (w *Lines) Printf(format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	fmt.Fprintf(&w.buf, format, args...)
	w.buf.WriteByte('\n')
}

// String is everything written so far.
func (w *Lines) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}
