// Package lockrank checks, in tests, that the broker takes its locks in
// the order LOCKS.md gives. A ranked lock is a sync.Mutex or RWMutex
// with a rank in its type: Mutex[Partition] is replica.Partition.mu. A
// lock may be held while taking one of a later rank, never one of the
// same or an earlier rank.
//
// Built as usual the ranked locks are the sync ones and cost nothing.
// Built with the lockrank tag (go test -tags lockrank, which make test
// runs over the packages whose locks are ranked), each goroutine's held
// ranks are tracked, and taking a lock out of order panics naming both
// locks, before it can deadlock.
//
// The package imports only the standard library, so the log and the
// other leaf packages can rank their locks.
package lockrank
