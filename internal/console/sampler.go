package console

import (
	"context"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/strandlog/strand/internal/inspect"
	"github.com/strandlog/strand/internal/lockrank"
)

// Bounds on what the sampler keeps: points per group (an hour at the
// default 10 s) and groups sampled.
const (
	maxPoints = 360
	maxGroups = 200
)

// lagPoint is a group's lag at one moment, in all and per partition.
type lagPoint struct {
	At         time.Time
	Total      int64
	Partitions map[inspect.Partition]int64
}

// topicEnds is the sum of a topic's end offsets at one moment.
type topicEnds struct {
	at  time.Time
	sum int64
}

// sampler reads every group's lag and every topic's end offsets at an
// interval, for the lag charts and the topics' rates.
type sampler struct {
	adm     *kadm.Client
	every   time.Duration
	timeout time.Duration
	logger  *slog.Logger
	quit    chan struct{}
	done    chan struct{}

	mu     lockrank.Mutex[lockrank.Leaf]
	lags   map[string][]lagPoint
	ends   map[string][2]topicEnds // the last two samples
	sample int                     // samples taken
}

func startSampler(adm *kadm.Client, every, timeout time.Duration, logger *slog.Logger) *sampler {
	s := &sampler{adm: adm, every: every, timeout: timeout, logger: logger, quit: make(chan struct{}), done: make(chan struct{}),
		lags: map[string][]lagPoint{}, ends: map[string][2]topicEnds{}}
	go s.run()
	return s
}

func (s *sampler) run() {
	defer close(s.done)
	t := time.NewTicker(s.every)
	defer t.Stop()
	for {
		s.take()
		select {
		case <-s.quit:
			return
		case <-t.C:
		}
	}
}

func (s *sampler) stop() {
	close(s.quit)
	<-s.done
}

// take reads one sample; what cannot be read now is left out of it.
func (s *sampler) take() {
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	go func() {
		select {
		case <-s.quit:
			cancel()
		case <-ctx.Done():
		}
	}()
	now := time.Now()
	if ends, err := s.adm.ListEndOffsets(ctx); err == nil {
		sums := map[string]int64{}
		ends.Each(func(o kadm.ListedOffset) {
			if o.Err == nil {
				sums[o.Topic] += o.Offset
			}
		})
		s.mu.Lock()
		for t, sum := range sums {
			prev := s.ends[t]
			s.ends[t] = [2]topicEnds{prev[1], {now, sum}}
		}
		s.mu.Unlock()
	}
	groups, err := inspect.ListGroups(ctx, s.adm)
	if err != nil {
		s.logger.Debug("console: sampling groups", "err", err)
		return
	}
	for i, lg := range groups {
		if i == maxGroups {
			break
		}
		g, err := inspect.ReadGroup(ctx, s.adm, lg.Group)
		if err != nil || !g.Exists() {
			continue
		}
		p := lagPoint{At: now, Total: g.TotalLag, Partitions: map[inspect.Partition]int64{}}
		for _, pl := range g.Partitions {
			p.Partitions[inspect.Partition{Topic: pl.Topic, Partition: pl.Partition}] = max(pl.Lag, 0)
		}
		s.mu.Lock()
		pts := append(s.lags[lg.Group], p)
		if len(pts) > maxPoints {
			pts = pts[len(pts)-maxPoints:]
		}
		s.lags[lg.Group] = pts
		s.mu.Unlock()
	}
	s.mu.Lock()
	s.sample++
	s.mu.Unlock()
}

// lagOf is group's lag samples, oldest first.
func (s *sampler) lagOf(group string) []lagPoint {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]lagPoint(nil), s.lags[group]...)
}

// rate is the records per second written to topic between the last two
// samples; false before there are two.
func (s *sampler) rate(topic string) (float64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.ends[topic]
	if e[0].at.IsZero() || !e[1].at.After(e[0].at) {
		return 0, false
	}
	return float64(e[1].sum-e[0].sum) / e[1].at.Sub(e[0].at).Seconds(), true
}
