package grouptest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Producer writes keyed records continuously, key-(i%Keys) and value v-i,
// at about Rate records a second, and keeps what was acknowledged.
type Producer struct {
	cl    *kgo.Client
	topic string

	mu    sync.Mutex
	acked Produced
	errs  []error
	sent  int

	stop, done chan struct{}
}

// ProducerKeys is how many distinct keys the producer cycles through.
const ProducerKeys = 64

// StartProducer starts writing to topic (franz-go's default, idempotent
// producer; keys spread over every partition).
func StartProducer(addr, topic string, rate int, opts ...kgo.Opt) (*Producer, error) {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic),
		kgo.ClientID("producer"), kgo.ProducerLinger(5 * time.Millisecond)}, opts...)...)
	if err != nil {
		return nil, err
	}
	p := &Producer{cl: cl, topic: topic, acked: Produced{}, stop: make(chan struct{}), done: make(chan struct{})}
	go p.run(rate)
	return p, nil
}

func (p *Producer) run(rate int) {
	defer close(p.done)
	const tick = 20 * time.Millisecond
	per := max(1, rate*int(tick)/int(time.Second))
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
		}
		for range per {
			p.mu.Lock()
			i := p.sent
			p.sent++
			p.mu.Unlock()
			r := &kgo.Record{Key: fmt.Appendf(nil, "key-%d", i%ProducerKeys), Value: fmt.Appendf(nil, "v-%d", i)}
			p.cl.Produce(context.Background(), r, p.ack)
		}
	}
}

func (p *Producer) ack(r *kgo.Record, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		p.errs = append(p.errs, fmt.Errorf("%s: %w", r.Value, err))
		return
	}
	m := p.acked[r.Partition]
	if m == nil {
		m = map[int64]Record{}
		p.acked[r.Partition] = m
	}
	m[r.Offset] = Record{Key: string(r.Key), Value: string(r.Value)}
}

// Count is how many records were acknowledged so far.
func (p *Producer) Count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.acked.Count()
}

// Stop stops producing, waits for every record to be acknowledged or to
// fail, and closes the client. It returns the failures, if any.
func (p *Producer) Stop(ctx context.Context) error {
	close(p.stop)
	<-p.done
	err := p.cl.Flush(ctx)
	p.cl.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	return errors.Join(append([]error{err}, p.errs...)...)
}

// Acked is a copy of what was acknowledged.
func (p *Producer) Acked() Produced {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := Produced{}
	out.Add(p.acked)
	return out
}
