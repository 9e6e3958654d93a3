package share

import (
	"errors"
	"slices"
	"strconv"
	"time"
)

// State is a record's state in a share-partition, numbered as Kafka
// numbers it in the share-group state it persists.
type State int8

const (
	Available    State = 0 // to be delivered (again)
	Acquired     State = 1 // held by one member under a lock
	Acknowledged State = 2 // accepted: done with
	Archived     State = 4 // rejected, given up after its delivery limit, or no record: done with
)

func (s State) String() string {
	switch s {
	case Available:
		return "Available"
	case Acquired:
		return "Acquired"
	case Acknowledged:
		return "Acknowledged"
	case Archived:
		return "Archived"
	}
	return "State(" + strconv.Itoa(int(s)) + ")"
}

// AckType is an acknowledgement's type, numbered as ShareFetch and
// ShareAcknowledge carry it.
type AckType int8

const (
	AckGap     AckType = 0 // the offset holds no record
	AckAccept  AckType = 1
	AckRelease AckType = 2 // deliver it again, to any member
	AckReject  AckType = 3
	AckRenew   AckType = 4 // keep it, with a new lock (KIP-1222)
)

// ErrInvalidRecordState: an acknowledgement of a record the member does
// not hold (never acquired, acquired by another, its lock expired, or
// acknowledged already), or of an unknown type; Kafka's
// INVALID_RECORD_STATE.
var ErrInvalidRecordState = errors.New("share: the record is not held by the member")

// Limits are a share-partition's settings: its group's.
type Limits struct {
	// DeliveryLimit is share.delivery.count.limit: a record released or
	// whose lock expired after this many deliveries is archived.
	DeliveryLimit int16
	// MaxInFlight is share.partition.max.record.locks: the most records
	// between the start offset and the end of the window. When the
	// window is full, only its available records are acquired.
	MaxInFlight int
	// LockDuration is share.record.lock.duration.ms: how long a member
	// holds a record it acquired.
	LockDuration time.Duration
}

// Range is the offsets First to Last, both included.
type Range struct{ First, Last int64 }

// AcquiredRecords is a run of offsets acquired together, with the delivery count
// they share: what ShareFetch answers as AcquiredRecords.
type AcquiredRecords struct {
	First, Last int64
	Deliveries  int16
}

// StateBatch is a run of in-flight offsets with one state and delivery
// count: what the share-group state persists. Acquired records are given
// as available: a lock does not outlive its broker.
type StateBatch struct {
	First, Last int64
	State       State
	Deliveries  int16
}

type record struct {
	state      State
	deliveries int16
	member     string
	deadline   time.Time
}

// Partition is one share group's view of one topic partition: every
// offset before its start is done with; records[i] is offset start+i, the
// in-flight window up to End.
type Partition struct {
	limits   Limits
	start    int64
	records  []record
	acquired int // records in state Acquired
}

// New is a share-partition starting at offset start, nothing in flight.
func New(start int64, limits Limits) *Partition {
	return &Partition{start: start, limits: limits}
}

// Restore is a share-partition as its persisted state says: the start
// offset and the in-flight batches. Offsets of the window no batch names
// were never delivered: they are available.
func Restore(start int64, batches []StateBatch, limits Limits) *Partition {
	p := New(start, limits)
	p.setBatches(batches)
	return p
}

// setBatches gives the offsets of batches their state and delivery count,
// the window growing to hold them; an acquired one is available, since
// its lock is not kept. Nothing may be held: it restores saved state.
func (p *Partition) setBatches(batches []StateBatch) {
	for _, b := range batches {
		for o := max(b.First, p.start); o <= b.Last; o++ {
			for p.End() <= o {
				p.records = append(p.records, record{state: Available})
			}
			st := b.State
			if st == Acquired {
				st = Available
			}
			p.records[o-p.start] = record{state: st, deliveries: b.Deliveries}
		}
	}
	p.advance()
}

// Clone is a copy of p, to go back to when a change cannot be made
// durable.
func (p *Partition) Clone() *Partition {
	c := *p
	c.records = slices.Clone(p.records)
	return &c
}

// SetLimits changes the settings, as a group config change does. Locks
// taken keep their deadline.
func (p *Partition) SetLimits(l Limits) { p.limits = l }

// Start is the share-partition start offset: every record before it is
// done with.
func (p *Partition) Start() int64 { return p.start }

// End is the first offset past the in-flight window: never acquired.
func (p *Partition) End() int64 { return p.start + int64(len(p.records)) }

// InFlight is how many offsets the window holds, and AcquiredCount how
// many of them members hold.
func (p *Partition) InFlight() int      { return len(p.records) }
func (p *Partition) AcquiredCount() int { return p.acquired }

// StateOf is offset o's state and delivery count: done with before the
// start (Acknowledged, as far as anyone can tell), Available from the end.
func (p *Partition) StateOf(o int64) (State, int16) {
	switch {
	case o < p.start:
		return Acknowledged, 0
	case o >= p.End():
		return Available, 0
	}
	r := p.records[o-p.start]
	return r.state, r.deliveries
}

// HolderOf is the member holding offset o, "" when none does.
func (p *Partition) HolderOf(o int64) string {
	if o < p.start || o >= p.End() || p.records[o-p.start].state != Acquired {
		return ""
	}
	return p.records[o-p.start].member
}

// NextFetchOffset is where the next acquisition reads the log from: the
// first available record in flight, else the end. ok is false when
// nothing can be acquired: the window is full and none of it available.
func (p *Partition) NextFetchOffset(now time.Time) (offset int64, ok bool) {
	p.Expire(now)
	for i := range p.records {
		if p.records[i].state == Available {
			return p.start + int64(i), true
		}
	}
	return p.End(), len(p.records) < p.limits.MaxInFlight
}

// Acquire gives member at most maxRecords records, locked until
// now+LockDuration: those of present that are in flight and available,
// then new ones past the end while the window has room. present are the
// runs of offsets that hold records, ascending, as the log returned them
// from NextFetchOffset on (the batches' offsets, control batches left
// out); an offset past the end that holds no record is archived as it is
// passed, since nothing will ever be delivered there.
func (p *Partition) Acquire(member string, present []Range, maxRecords int, now time.Time) []AcquiredRecords {
	p.Expire(now)
	var out []AcquiredRecords
	count := 0
	deadline := now.Add(p.limits.LockDuration)
runs:
	for _, r := range present {
		for o := max(r.First, p.start); o <= r.Last && count < maxRecords; o++ {
			if o >= p.End() {
				for p.End() < o && len(p.records) < p.limits.MaxInFlight {
					p.records = append(p.records, record{state: Archived})
				}
				if len(p.records) >= p.limits.MaxInFlight {
					break runs
				}
				p.records = append(p.records, record{state: Available})
			}
			rec := &p.records[o-p.start]
			if rec.state != Available {
				continue
			}
			rec.state, rec.member, rec.deadline = Acquired, member, deadline
			rec.deliveries++
			p.acquired++
			count++
			if n := len(out); n > 0 && out[n-1].Last == o-1 && out[n-1].Deliveries == rec.deliveries {
				out[n-1].Last = o
			} else {
				out = append(out, AcquiredRecords{First: o, Last: o, Deliveries: rec.deliveries})
			}
		}
		if count >= maxRecords {
			break
		}
	}
	p.advance()
	return out
}

// Acknowledge applies member's acknowledgement of offsets first to last:
// types holds one type for them all, or one per offset. Every offset must
// be held by member, its lock not expired, and every type known;
// otherwise nothing changes and the error is ErrInvalidRecordState.
func (p *Partition) Acknowledge(member string, first, last int64, types []AckType, now time.Time) error {
	p.Expire(now)
	n := last - first + 1
	if n <= 0 || (len(types) != 1 && int64(len(types)) != n) || first < p.start || last >= p.End() {
		return ErrInvalidRecordState
	}
	typeOf := func(o int64) AckType {
		if len(types) == 1 {
			return types[0]
		}
		return types[o-first]
	}
	for o := first; o <= last; o++ {
		r := &p.records[o-p.start]
		if r.state != Acquired || r.member != member || typeOf(o) < AckGap || typeOf(o) > AckRenew {
			return ErrInvalidRecordState
		}
	}
	for o := first; o <= last; o++ {
		r := &p.records[o-p.start]
		switch typeOf(o) {
		case AckAccept:
			p.settle(r, Acknowledged)
		case AckGap, AckReject:
			p.settle(r, Archived)
		case AckRelease:
			p.release(r)
		case AckRenew:
			r.deadline = now.Add(p.limits.LockDuration)
		}
	}
	p.advance()
	return nil
}

// Expire releases the records whose lock ran out by now, and reports
// whether there were any.
func (p *Partition) Expire(now time.Time) bool {
	if p.acquired == 0 {
		return false
	}
	expired := false
	for i := range p.records {
		if r := &p.records[i]; r.state == Acquired && !now.Before(r.deadline) {
			p.release(r)
			expired = true
		}
	}
	if expired {
		p.advance()
	}
	return expired
}

// NextDeadline is when the first lock held runs out; ok is false when no
// record is acquired.
func (p *Partition) NextDeadline() (deadline time.Time, ok bool) {
	for i := range p.records {
		if r := p.records[i]; r.state == Acquired && (!ok || r.deadline.Before(deadline)) {
			deadline, ok = r.deadline, true
		}
	}
	return deadline, ok
}

// ReleaseMember releases every record member holds, as when it leaves the
// group or closes its share session, and reports how many there were.
func (p *Partition) ReleaseMember(member string) int {
	n := 0
	for i := range p.records {
		if r := &p.records[i]; r.state == Acquired && r.member == member {
			p.release(r)
			n++
		}
	}
	p.advance()
	return n
}

// Archive gives up the offsets first to last that are not held or done
// with: records of aborted transactions, which a read_committed group
// never delivers.
func (p *Partition) Archive(first, last int64) {
	for o := max(first, p.start); o <= last; o++ {
		for p.End() <= o && len(p.records) < p.limits.MaxInFlight {
			p.records = append(p.records, record{state: Available})
		}
		if o >= p.End() {
			break // the window is full: the rest is archived when it has room
		}
		if r := &p.records[o-p.start]; r.state == Available {
			r.state = Archived
		}
	}
	p.advance()
}

// MoveStart moves the start offset up to logStart, the log's, when
// retention deleted records still in flight: they are gone, held or not.
func (p *Partition) MoveStart(logStart int64) {
	if logStart <= p.start {
		return
	}
	drop := min(logStart-p.start, int64(len(p.records)))
	for _, r := range p.records[:drop] {
		if r.state == Acquired {
			p.acquired--
		}
	}
	p.records = append(p.records[:0], p.records[drop:]...)
	p.start = logStart
	p.advance()
}

// Reset starts the share-partition again at offset start, nothing in
// flight: an offset reset, made while no member holds anything.
func (p *Partition) Reset(start int64) {
	p.start, p.records, p.acquired = start, nil, 0
}

// StateBatches is the in-flight window as runs of one state and delivery
// count, acquired records given as available.
func (p *Partition) StateBatches() []StateBatch {
	var out []StateBatch
	for i, r := range p.records {
		o, st := p.start+int64(i), r.state
		if st == Acquired {
			st = Available
		}
		if n := len(out); n > 0 && out[n-1].State == st && out[n-1].Deliveries == r.deliveries {
			out[n-1].Last = o
			continue
		}
		out = append(out, StateBatch{First: o, Last: o, State: st, Deliveries: r.deliveries})
	}
	return out
}

// release makes an acquired record available again, or archives it once
// it reached the delivery limit.
func (p *Partition) release(r *record) {
	if r.deliveries >= p.limits.DeliveryLimit {
		p.settle(r, Archived)
		return
	}
	p.acquired--
	r.state, r.member, r.deadline = Available, "", time.Time{}
}

// settle marks an acquired record done with.
func (p *Partition) settle(r *record, st State) {
	if r.state == Acquired {
		p.acquired--
	}
	r.state, r.member, r.deadline = st, "", time.Time{}
}

// advance moves the start past the records done with.
func (p *Partition) advance() {
	i := 0
	for i < len(p.records) && (p.records[i].state == Acknowledged || p.records[i].state == Archived) {
		i++
	}
	if i > 0 {
		p.records = append(p.records[:0], p.records[i:]...)
		p.start += int64(i)
	}
}
