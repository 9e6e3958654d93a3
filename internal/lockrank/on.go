//go:build lockrank

package lockrank

import (
	"bytes"
	"fmt"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"sync"
)

// Checked reports whether lock order is checked in this build.
const Checked = true

// Mutex is a sync.Mutex of rank R whose order is checked.
type Mutex[R any] struct{ mu sync.Mutex }

func (m *Mutex[R]) Lock() {
	r := rankOf[R]()
	acquire(r)
	m.mu.Lock()
}

func (m *Mutex[R]) TryLock() bool {
	if !m.mu.TryLock() {
		return false
	}
	hold(rankOf[R]()) // a try cannot wait, so it cannot deadlock: no order to check
	return true
}

func (m *Mutex[R]) Unlock() {
	release(rankOf[R]())
	m.mu.Unlock()
}

// RWMutex is a sync.RWMutex of rank R whose order is checked; a read
// lock counts as the lock.
type RWMutex[R any] struct{ mu sync.RWMutex }

func (m *RWMutex[R]) Lock() {
	acquire(rankOf[R]())
	m.mu.Lock()
}

func (m *RWMutex[R]) Unlock() {
	release(rankOf[R]())
	m.mu.Unlock()
}

func (m *RWMutex[R]) RLock() {
	acquire(rankOf[R]())
	m.mu.RLock()
}

func (m *RWMutex[R]) RUnlock() {
	release(rankOf[R]())
	m.mu.RUnlock()
}

func (m *RWMutex[R]) TryLock() bool {
	if !m.mu.TryLock() {
		return false
	}
	hold(rankOf[R]())
	return true
}

func (m *RWMutex[R]) TryRLock() bool {
	if !m.mu.TryRLock() {
		return false
	}
	hold(rankOf[R]())
	return true
}

type rank struct {
	level int
	name  string
}

var levels = func() map[string]int {
	m := make(map[string]int, len(order))
	for i, name := range order {
		m[name] = i
	}
	return m
}()

func rankOf[R any]() rank {
	name := reflect.TypeFor[R]().Name()
	level, ok := levels[name]
	if !ok {
		panic("lockrank: rank " + name + " is not in the order")
	}
	return rank{level, name}
}

// held is each goroutine's ranks held, in the order taken.
var (
	heldMu sync.Mutex
	held   = map[int64][]rank{}
)

func goroutineID() int64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	id, _ := strconv.ParseInt(string(b[:bytes.IndexByte(b, ' ')]), 10, 64)
	return id
}

// acquire checks that r comes after every rank the goroutine holds, then
// records it.
func acquire(r rank) {
	id := goroutineID()
	heldMu.Lock()
	for _, h := range held[id] {
		if h.level >= r.level || slices.Contains(leaves, h.name) {
			heldMu.Unlock()
			why := fmt.Sprintf("LOCKS.md orders %s before %s", r.name, h.name)
			switch {
			case slices.Contains(leaves, h.name):
				why = h.name + " is a leaf: no lock is taken under it"
			case h.level == r.level:
				why = "locks of one rank never nest"
			}
			panic(fmt.Sprintf("lockrank: taking a %s lock while holding a %s lock: %s", r.name, h.name, why))
		}
	}
	held[id] = append(held[id], r)
	heldMu.Unlock()
}

func hold(r rank) {
	id := goroutineID()
	heldMu.Lock()
	held[id] = append(held[id], r)
	heldMu.Unlock()
}

// release forgets the last r the goroutine took. A lock released by
// another goroutine than the one that took it is not tracked there.
func release(r rank) {
	id := goroutineID()
	heldMu.Lock()
	defer heldMu.Unlock()
	hs := held[id]
	for i := len(hs) - 1; i >= 0; i-- {
		if hs[i] == r {
			hs = append(hs[:i], hs[i+1:]...)
			break
		}
	}
	if len(hs) == 0 {
		delete(held, id)
	} else {
		held[id] = hs
	}
}
