package txn

import (
	"math"
	"slices"
	"time"

	"github.com/strandlog/strand/internal/lockrank"
	"github.com/strandlog/strand/internal/model"
)

// state is a transaction's state, numbered as Kafka stores it
// (TxnMetadataValue.State).
type state int8

const (
	stateEmpty             state = 0
	stateOngoing           state = 1
	statePrepareCommit     state = 2
	statePrepareAbort      state = 3
	stateCompleteCommit    state = 4
	stateCompleteAbort     state = 5
	stateDead              state = 6
	statePrepareEpochFence state = 7
)

var stateNames = [...]string{"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit",
	"CompleteAbort", "Dead", "PrepareEpochFence"}

// String is Kafka's name of the state (DescribeTransactions,
// ListTransactions).
func (s state) String() string {
	if s >= 0 && int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "Unknown"
}

func (s state) preparing() bool { return s == statePrepareCommit || s == statePrepareAbort }
func (s state) complete() bool  { return s == stateCompleteCommit || s == stateCompleteAbort }

// idle: no transaction in progress; the id may expire, and InitProducerID
// bumps the epoch directly.
func (s state) idle() bool { return s == stateEmpty || s.complete() }

// Client transaction versions (Kafka's TransactionVersion feature levels):
// EndTxn v5+ is version 2 (KIP-890 part 2, an epoch bump on every EndTxn).
const (
	clientVersionV1 int16 = 0
	clientVersionV2 int16 = 2
)

// exhausted is Kafka's isEpochExhausted: one more bump is the last an id
// takes, so the next one gives a new producer id instead.
func exhausted(epoch int16) bool { return epoch >= math.MaxInt16-1 }

// meta is one transactional id's state, as stored (except lastEpoch).
// Values are copied to prepare a transition; parts is never modified in
// place, so copies may share it.
type meta struct {
	state state
	pid   int64
	epoch int16
	// lastEpoch is the epoch before the last bump, to recognise a retried
	// InitProducerID (KIP-360) or EndTxn; -1: none. Not stored, as in
	// Kafka.
	lastEpoch int16
	prevPID   int64 // the producer id before the last rotation; -1: none
	// nextPID is the producer id a v2 EndTxn rotated to because the epoch
	// was exhausted: it takes over (epoch 0) when the transaction
	// completes. -1: none.
	nextPID   int64
	timeoutMs int32
	parts     []model.TopicPartition // sorted
	startMs   int64                  // the transaction's start; -1: none
	updateMs  int64
	clientVer int16
}

func (m *meta) has(tp model.TopicPartition) bool {
	_, ok := slices.BinarySearchFunc(m.parts, tp, cmpTP)
	return ok
}

// txn is a transactional id and its state.
type txn struct {
	id   string
	home *served // the leadership of its partition it belongs to; fixed

	mu lockrank.Mutex[lockrank.GroupOrTxn]
	meta
	// pending: a record of t is being made durable; no other transition
	// may start (requests answer ErrConcurrentTransactions, as Kafka's
	// pendingTransitionInProgress).
	pending bool
	// settled is closed when the pending record is durable or failed
	// (queued adds wait for it).
	settled chan struct{}
	// ending: the pending record decides the transaction (a Prepare
	// state); Verify then refuses batches, which could otherwise land
	// after the markers and open a transaction only the partition knows.
	ending bool
	// removed: the id expired and left the map; whoever finds it must
	// look the id up again.
	removed bool
	// finishing: a background job is driving a Prepare* state to
	// Complete* (markers, then the Complete record).
	finishing bool
}

// info is t's public view. Caller holds t.mu.
func (t *txn) info() TxnInfo {
	ti := TxnInfo{
		ID: t.id, State: t.state.String(), ProducerID: t.pid, ProducerEpoch: t.epoch,
		Timeout:       time.Duration(t.timeoutMs) * time.Millisecond,
		LastUpdate:    time.UnixMilli(t.updateMs),
		Partitions:    slices.Clone(t.parts),
		ClientVersion: t.clientVer,
	}
	if t.startMs >= 0 {
		ti.Start = time.UnixMilli(t.startMs)
	}
	return ti
}

// The transitions below are Kafka's TransactionMetadata.prepare*: each
// returns the next state without changing m.

// bumpEpoch is InitProducerID on an idle id: KIP-360's epoch check when the
// producer names its current (pid, epoch), then a bump. ok is false when
// the producer is fenced.
func (m meta) bumpEpoch(expected bool, expectedEpoch int16, timeoutMs int32, now int64) (meta, bool) {
	n := m
	switch {
	case !expected:
		n.epoch, n.lastEpoch = m.epoch+1, -1
	case m.epoch < 0 || expectedEpoch == m.epoch:
		n.epoch, n.lastEpoch = m.epoch+1, m.epoch
	case expectedEpoch == m.lastEpoch:
		// A retry of a bump whose answer the producer did not get:
		// answer the current epoch again.
	default:
		return meta{}, false
	}
	n.idle(stateEmpty, timeoutMs, now)
	return n, true
}

// rotate gives the id a new producer id with epoch 0 (the epoch is
// exhausted).
func (m meta) rotate(pid int64, recordLast bool, timeoutMs int32, now int64) meta {
	n := m
	n.prevPID, n.pid, n.epoch, n.lastEpoch = m.pid, pid, 0, -1
	if recordLast {
		n.lastEpoch = m.epoch
	}
	n.idle(stateEmpty, timeoutMs, now)
	return n
}

func (m *meta) idle(s state, timeoutMs int32, now int64) {
	m.state, m.timeoutMs, m.parts, m.startMs, m.updateMs, m.nextPID = s, timeoutMs, nil, -1, now, -1
}

// addPartitions makes the transaction Ongoing with tps added.
func (m meta) addPartitions(tps []model.TopicPartition, now int64) meta {
	n := m
	if m.state != stateOngoing {
		n.startMs = now
	}
	n.state, n.updateMs = stateOngoing, now
	n.parts = sortParts(append(slices.Clone(m.parts), tps...))
	return n
}

// prepareEnd is EndTxn's Prepare* state. With clientVer 2 the epoch is
// bumped (to MaxInt16 with nextPID set when exhausted, nextPID taking
// over at completion). empty: no partition was added (a v2 abort of an
// idle id), so the start time is now.
func (m meta) prepareEnd(commit bool, clientVer int16, nextPID int64, empty bool, now int64) meta {
	n := m
	n.state = statePrepareAbort
	if commit {
		n.state = statePrepareCommit
	}
	if clientVer >= clientVersionV2 {
		n.lastEpoch = m.epoch
		if m.epoch < math.MaxInt16 {
			n.epoch = m.epoch + 1
		}
		n.nextPID = nextPID
	}
	if empty {
		n.parts, n.startMs = nil, now
	}
	n.clientVer, n.updateMs = clientVer, now
	return n
}

// fence is the abort the coordinator starts itself (InitProducerID on an
// Ongoing transaction, or its timeout): PrepareAbort with the epoch bumped
// so the producer is fenced (Kafka's PrepareEpochFence, which is never
// stored). At MaxInt16 no bump is left: a new producer id takes over at
// completion.
func (m meta) fence(nextPID int64, now int64) meta {
	n := m
	n.state, n.lastEpoch, n.updateMs = statePrepareAbort, -1, now
	if m.epoch < math.MaxInt16 {
		n.epoch = m.epoch + 1
	} else {
		n.nextPID = nextPID
	}
	return n
}

// complete is Prepare*'s successor once every marker is written.
func (m meta) complete(now int64) meta {
	n := m
	n.state = stateCompleteAbort
	if m.state == statePrepareCommit {
		n.state = stateCompleteCommit
	}
	if m.nextPID >= 0 {
		// The client last saw epoch MaxInt16-1 of the old id; a retry
		// with it is recognised through prevPID.
		n.prevPID, n.pid, n.epoch = m.pid, m.nextPID, 0
	}
	n.nextPID, n.parts, n.updateMs = -1, nil, now
	return n
}

// answer is the producer id and epoch a client uses after m's Prepare*
// completes.
func (m *meta) answer() (int64, int16) {
	if m.nextPID >= 0 {
		return m.nextPID, 0
	}
	return m.pid, m.epoch
}
