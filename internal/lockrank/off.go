//go:build !lockrank

package lockrank

import "sync"

// Mutex is a sync.Mutex of rank R.
type Mutex[R any] struct{ sync.Mutex }

// RWMutex is a sync.RWMutex of rank R.
type RWMutex[R any] struct{ sync.RWMutex }

// Checked reports whether lock order is checked in this build.
const Checked = false
