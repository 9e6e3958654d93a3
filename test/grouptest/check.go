package grouptest

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Record is a produced record's key and value.
type Record struct{ Key, Value string }

// Produced is what a producer had acknowledged, by partition and offset.
type Produced map[int32]map[int64]Record

// Count is the number of records.
func (p Produced) Count() int {
	n := 0
	for _, m := range p {
		n += len(m)
	}
	return n
}

// Add adds other's records.
func (p Produced) Add(other Produced) {
	for part, m := range other {
		if p[part] == nil {
			p[part] = map[int64]Record{}
		}
		for o, r := range m {
			p[part][o] = r
		}
	}
}

// Dense says which partitions' offsets are not dense from 0: when one
// producer alone writes a topic, a hole is a record it does not know of.
func (p Produced) Dense() error {
	var errs []error
	for part, m := range p {
		var end int64
		for o := range m {
			end = max(end, o+1)
		}
		if int64(len(m)) != end {
			errs = append(errs, fmt.Errorf("partition %d: %d records acknowledged at offsets below %d", part, len(m), end))
		}
	}
	return errors.Join(errs...)
}

// Ends is each partition's end: one past its highest acknowledged offset.
func (p Produced) Ends() map[int32]int64 {
	out := map[int32]int64{}
	for part, m := range p {
		for o := range m {
			out[part] = max(out[part], o+1)
		}
	}
	return out
}

// Session is one consumer's continuous ownership of one partition: from
// an assigned event to the revoked or lost event (or the log's end, which
// for a killed consumer is its death).
type Session struct {
	Member    string
	Partition int32
	Start     time.Time
	End       Kind // Revoked, Lost, Closed, or "" when the log ends with it owned
	// Offsets are the processed offsets, in order.
	Offsets []int64
	// Committed is the highest offset this session's consumer logged as
	// committed for the partition; -1 if it committed nothing.
	Committed int64
	// Resumed is the highest offset logged as committed for the partition
	// before the session (0 if none): where it should begin.
	Resumed int64

	member, index int // tie-breaks for sessions starting at the same microsecond
}

// First and Last are the first and last processed offsets, -1 if none.
func (s *Session) First() int64 {
	if len(s.Offsets) == 0 {
		return -1
	}
	return s.Offsets[0]
}

func (s *Session) Last() int64 {
	if len(s.Offsets) == 0 {
		return -1
	}
	return slices.Max(s.Offsets)
}

// TailFrom is where the session's processed-but-uncommitted tail begins:
// its last commit, or its first offset when it committed nothing (what it
// started from was the committed offset, or the reset position).
func (s *Session) TailFrom() int64 {
	if len(s.Offsets) == 0 {
		return -1
	}
	return max(s.First(), s.Committed)
}

// Tail is how many records the session had processed (fetched and handed
// to the application) but not committed when it ended: the most the next
// owner can process again.
func (s *Session) Tail() int64 {
	if len(s.Offsets) == 0 {
		return 0
	}
	return max(0, s.Last()+1-s.TailFrom())
}

func (s *Session) String() string {
	end := string(s.End)
	if end == "" {
		end = "open"
	}
	if len(s.Offsets) == 0 {
		return fmt.Sprintf("%s p%d from %s (%s): nothing processed", s.Member, s.Partition, s.Start.Format("15:04:05.000000"), end)
	}
	return fmt.Sprintf("%s p%d from %s (%s): processed %d..%d (%d), committed %d, tail %d", s.Member, s.Partition,
		s.Start.Format("15:04:05.000000"), end, s.First(), s.Last(), len(s.Offsets), s.Committed, s.Tail())
}

// Report is Check's accounting.
type Report struct {
	Produced   int // acknowledged records
	Processed  int // processed events
	Distinct   int // distinct (partition, offset) processed
	Duplicates int // processed events beyond the first of each record
	Skipped    int // acknowledged records nobody processed
	// Bound is what was processed but not committed when a partition
	// changed hands (the sum of the tails of every session that another
	// session of its partition followed): no more can be processed twice.
	Bound    int64
	Handoffs int // sessions followed by a session of another member
	// Sessions by partition, in the order they began.
	Sessions map[int32][]*Session
	Problems []string
}

func (r *Report) problem(format string, args ...any) {
	r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
}

// OK reports whether Check found nothing wrong.
func (r *Report) OK() bool { return len(r.Problems) == 0 }

// Summary is the report in one line.
func (r *Report) Summary() string {
	return fmt.Sprintf("produced %d, processed %d (%d distinct), skipped %d, duplicates %d, bound %d "+
		"(processed but uncommitted at %d hand-offs), problems %d",
		r.Produced, r.Processed, r.Distinct, r.Skipped, r.Duplicates, r.Bound, r.Handoffs, len(r.Problems))
}

// Details lists the problems (up to max) and every partition's sessions.
func (r *Report) Details(max int) string {
	var b strings.Builder
	for i, p := range r.Problems {
		if i == max {
			fmt.Fprintf(&b, "... %d more problems\n", len(r.Problems)-max)
			break
		}
		fmt.Fprintf(&b, "problem: %s\n", p)
	}
	parts := make([]int32, 0, len(r.Sessions))
	for p := range r.Sessions {
		parts = append(parts, p)
	}
	slices.Sort(parts)
	for _, p := range parts {
		for _, s := range r.Sessions[p] {
			fmt.Fprintf(&b, "  %s\n", s)
		}
	}
	return b.String()
}

// Check accounts for every acknowledged record from the consumers' logs:
//
//   - every record was processed at least once (none skipped), and what
//     was processed is what was produced;
//   - a consumer processes only partitions it owns, each record once per
//     ownership, and commits only what it owns;
//   - a new owner starts at or above the highest offset committed before
//     it (no re-reading of committed data);
//   - every record processed twice lies in the uncommitted tail of an
//     earlier owner's session (so duplicates never exceed Bound).
func Check(produced Produced, logs ...*Log) *Report {
	r := &Report{Produced: produced.Count(), Sessions: map[int32][]*Session{}}
	for mi, l := range logs {
		open := map[int32]*Session{}
		last := map[int32]*Session{}
		begin := func(p int32, at time.Time, idx int) {
			s := &Session{Member: l.Name, Partition: p, Start: at, Committed: -1, member: mi, index: idx}
			open[p], last[p] = s, s
			r.Sessions[p] = append(r.Sessions[p], s)
		}
		end := func(p int32, k Kind) {
			if s := open[p]; s != nil {
				s.End = k
				delete(open, p)
			}
		}
		for i, e := range l.Events {
			switch e.Kind {
			case Assigned:
				for _, p := range e.Partitions {
					if open[p] != nil {
						r.problem("%s: assigned partition %d it already owns", l.Name, p)
						continue
					}
					begin(p, e.Time, i)
				}
			case Revoked, Lost:
				for _, p := range e.Partitions {
					if open[p] == nil {
						r.problem("%s: %s partition %d it does not own", l.Name, e.Kind, p)
					}
					end(p, e.Kind)
				}
			case Closed:
				for p := range open {
					end(p, Closed)
				}
			case Processed:
				s := open[e.Partition]
				if s == nil {
					r.problem("%s: processed %d/%d without owning the partition", l.Name, e.Partition, e.Offset)
					if s = last[e.Partition]; s == nil {
						begin(e.Partition, time.Time{}, i)
						s = open[e.Partition]
						delete(open, e.Partition)
					}
				}
				s.Offsets = append(s.Offsets, e.Offset)
				r.Processed++
				want, ok := produced[e.Partition][e.Offset]
				switch {
				case !ok:
					r.problem("%s: processed %d/%d, which was not produced", l.Name, e.Partition, e.Offset)
				case want.Key != e.Key || want.Value != e.Value:
					r.problem("%s: processed %d/%d as %s=%s, produced as %s=%s", l.Name, e.Partition, e.Offset,
						e.Key, e.Value, want.Key, want.Value)
				}
			case Committed:
				for p, o := range e.Offsets {
					s := open[p]
					if s == nil {
						r.problem("%s: committed %d for partition %d without owning it", l.Name, o, p)
						continue
					}
					if o < s.Committed {
						r.problem("%s: committed %d for partition %d after committing %d", l.Name, o, p, s.Committed)
					}
					if s.Last() >= 0 && o > s.Last()+1 {
						r.problem("%s: committed %d for partition %d, beyond what it processed (%d)", l.Name, o, p, s.Last())
					}
					s.Committed = max(s.Committed, o)
				}
			}
		}
	}

	seen := map[int32]map[int64]int{} // partition, offset → first session index
	for p, ss := range r.Sessions {
		slices.SortStableFunc(ss, func(a, b *Session) int {
			return cmp.Or(a.Start.Compare(b.Start), cmp.Compare(a.member, b.member), cmp.Compare(a.index, b.index))
		})
		seen[p] = map[int64]int{}
		committed := int64(0) // highest committed offset before each session
		for k, s := range ss {
			if k+1 < len(ss) {
				r.Bound += s.Tail()
				if ss[k+1].Member != s.Member {
					r.Handoffs++
				}
			}
			s.Resumed = committed
			if s.First() >= 0 && s.First() < committed {
				r.problem("%s re-read committed data of partition %d: started at %d, %d was committed before it",
					s.Member, p, s.First(), committed)
			}
			mine := map[int64]bool{}
			for _, o := range s.Offsets {
				if mine[o] {
					r.problem("%s processed %d/%d twice in one ownership", s.Member, p, o)
					r.Duplicates++
					continue
				}
				mine[o] = true
				j, dup := seen[p][o]
				if !dup {
					seen[p][o] = k
					continue
				}
				r.Duplicates++
				explained := false
				for _, prev := range ss[j:k] {
					if prev.Last() >= o && o >= prev.TailFrom() {
						explained = true
						break
					}
				}
				if !explained {
					r.problem("%s processed %d/%d again, though no earlier owner's uncommitted tail holds it "+
						"(first processed by %s)", s.Member, p, o, ss[j].Member)
				}
			}
			committed = max(committed, s.Committed)
		}
	}
	for _, m := range seen {
		r.Distinct += len(m)
	}
	for p, recs := range produced {
		for o := range recs {
			if _, ok := seen[p][o]; !ok {
				r.Skipped++
				if r.Skipped <= 10 {
					r.problem("record %d/%d was never processed", p, o)
				}
			}
		}
	}
	if r.Skipped > 10 {
		r.problem("... %d records never processed in all", r.Skipped)
	}
	if int64(r.Duplicates) > r.Bound {
		r.problem("%d records processed twice, more than the %d processed but uncommitted at hand-offs", r.Duplicates, r.Bound)
	}
	return r
}
