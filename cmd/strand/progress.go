package main

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// progress shows how far a long operation got, once a second on one line
// of a terminal: only when w is one, so that scripts and logs see none of
// it.
type progress struct {
	w     io.Writer
	what  string
	n     atomic.Int64
	start time.Time
	// interval is how often the line is written.
	interval time.Duration
	stop     chan struct{}
	done     chan struct{}
	once     sync.Once
}

// startProgress reports n of what every second on w, if w is a terminal;
// nil otherwise (its methods do nothing then).
func startProgress(w io.Writer, what string) *progress {
	if !isTerminal(w) {
		return nil
	}
	return newProgress(w, what, time.Second)
}

// newProgress reports on w every interval, whatever w is.
func newProgress(w io.Writer, what string, interval time.Duration) *progress {
	p := &progress{w: w, what: what, start: time.Now(), interval: interval, stop: make(chan struct{}), done: make(chan struct{})}
	go p.run()
	return p
}

func (p *progress) add(n int64) {
	if p != nil {
		p.n.Add(n)
	}
}

func (p *progress) run() {
	defer close(p.done)
	t := time.NewTicker(p.interval)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			fmt.Fprint(p.w, "\r\033[K") // clear the line for the summary
			return
		case <-t.C:
			n := p.n.Load()
			fmt.Fprintf(p.w, "\r\033[K%d %s (%.0f/s)", n, p.what, float64(n)/time.Since(p.start).Seconds())
		}
	}
}

// end clears the progress line; it may be called more than once.
func (p *progress) end() {
	if p != nil {
		p.once.Do(func() { close(p.stop) })
		<-p.done
	}
}
