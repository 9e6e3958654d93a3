package raft

import (
	"errors"
	"fmt"
)

// Errors the node returns. ErrNoLeader, ErrTimeout and ErrDropped are
// retriable (Retriable says so); wrapped errors keep the detail while
// errors.Is finds the kind.
var (
	// ErrNoLeader: no leader was known before the context ended, so the
	// proposal was never handed to Raft. Nothing was proposed.
	ErrNoLeader = errors.New("cluster/raft: no leader")
	// ErrTimeout: the proposal was handed to Raft but had not applied on this
	// node when the context ended. Its outcome is unknown: it may still
	// commit and apply later (its result is then dropped).
	ErrTimeout = errors.New("cluster/raft: proposal not applied before the deadline")
	// ErrDropped: Raft refused the proposal at once, e.g. during a leadership
	// transfer. Nothing was proposed.
	ErrDropped = errors.New("cluster/raft: proposal dropped")
	// ErrStopped: the node was closed, or its loop stopped on an error.
	ErrStopped = errors.New("cluster/raft: node stopped")
	// ErrMembership: a membership change was refused, e.g. adding a voter
	// as a learner.
	ErrMembership = errors.New("cluster/raft: membership change refused")
	// ErrCorrupt: stored state that was durable failed its checks, or the
	// log holds an entry this package cannot read. It is never retried and
	// never repaired silently; an operator decides.
	ErrCorrupt = errors.New("cluster/raft: stored state is corrupt")
)

// CorruptError says which file failed its checks, and where.
type CorruptError struct {
	File   string
	Pos    int64 // byte position in File, or -1 when the whole file is at fault
	Reason string
}

func (e *CorruptError) Error() string {
	if e.Pos < 0 {
		return fmt.Sprintf("cluster/raft: stored state is corrupt: %s: %s", e.File, e.Reason)
	}
	return fmt.Sprintf("cluster/raft: stored state is corrupt: %s at byte %d: %s", e.File, e.Pos, e.Reason)
}

func (e *CorruptError) Unwrap() error { return ErrCorrupt }

// Retriable reports whether err means "try again, perhaps elsewhere": no
// leader, a proposal timed out (its outcome unknown) or dropped.
func Retriable(err error) bool {
	return errors.Is(err, ErrNoLeader) || errors.Is(err, ErrTimeout) || errors.Is(err, ErrDropped)
}
