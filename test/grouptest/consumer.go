package grouptest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// KillSwitch is a dialer whose connections can all be cut at once, every
// later dial refused: the client is as good as dead, and never sends a
// LeaveGroup.
type KillSwitch struct {
	mu    sync.Mutex
	dead  bool
	conns []net.Conn
}

// Dial is a kgo.Dialer.
func (k *KillSwitch) Dial(ctx context.Context, network, host string) (net.Conn, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.dead {
		return nil, errors.New("killed")
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, network, host)
	if err == nil {
		k.conns = append(k.conns, c)
	}
	return c, err
}

// Kill cuts every connection and refuses new ones.
func (k *KillSwitch) Kill() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.dead = true
	k.cut()
}

// Flap cuts every connection, as a network blip does; new ones are made
// as the client asks.
func (k *KillSwitch) Flap() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.cut()
}

func (k *KillSwitch) cut() {
	for _, c := range k.conns {
		c.Close()
	}
	k.conns = nil
}

// ConsumerConfig is a franz-go group consumer that behaves like a service.
type ConsumerConfig struct {
	Name              string // client id and log name
	Addr, Group       string
	Topic             string
	Balancers         []kgo.GroupBalancer // default: cooperative-sticky (kgo's default)
	InstanceID        string              // static membership when set
	SessionTimeout    time.Duration       // default 6s
	HeartbeatInterval time.Duration       // default 500ms
	RebalanceTimeout  time.Duration       // default 20s
	CommitEvery       int                 // default 100 records
	CommitInterval    time.Duration       // default 200ms
	Opts              []kgo.Opt           // last, so they win
	// ServerSide makes it a member of a consumer group (KIP-848): the
	// broker assigns, and Balancers must be range or sticky (franz-go's
	// rule for opting in).
	ServerSide bool
}

// Consumer is a franz-go group member that processes what it polls (logs
// it), commits what it processed every CommitEvery records or
// CommitInterval, and when partitions are revoked, as a service would. It
// blocks rebalances while it processes a poll (BlockRebalanceOnPoll), so
// no partition moves between processing and committing.
type Consumer struct {
	cfg    ConsumerConfig
	cl     *kgo.Client
	ks     *KillSwitch
	out    Lines
	dead   atomic.Bool
	cancel context.CancelFunc
	done   chan struct{} // the poll loop ended
	closed chan struct{} // the client is closed

	mu         sync.Mutex
	next       map[int32]int64 // owned partitions: the next offset to process, once one was
	committed  map[int32]int64
	since      int
	lastCommit time.Time
	stopOnce   sync.Once
}

// StartConsumer starts a consumer and its poll loop.
func StartConsumer(cfg ConsumerConfig) (*Consumer, error) {
	if cfg.SessionTimeout == 0 {
		cfg.SessionTimeout = 6 * time.Second
	}
	if cfg.HeartbeatInterval == 0 {
		cfg.HeartbeatInterval = 500 * time.Millisecond
	}
	if cfg.RebalanceTimeout == 0 {
		cfg.RebalanceTimeout = 20 * time.Second
	}
	if cfg.CommitEvery == 0 {
		cfg.CommitEvery = 100
	}
	if cfg.CommitInterval == 0 {
		cfg.CommitInterval = 200 * time.Millisecond
	}
	c := &Consumer{cfg: cfg, ks: &KillSwitch{}, done: make(chan struct{}), closed: make(chan struct{}),
		next: map[int32]int64{}, committed: map[int32]int64{}, lastCommit: time.Now()}
	opts := []kgo.Opt{
		kgo.SeedBrokers(cfg.Addr), kgo.ClientID(cfg.Name), kgo.Dialer(c.ks.Dial),
		kgo.ConsumerGroup(cfg.Group), kgo.ConsumeTopics(cfg.Topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.SessionTimeout(cfg.SessionTimeout), kgo.HeartbeatInterval(cfg.HeartbeatInterval),
		kgo.RebalanceTimeout(cfg.RebalanceTimeout),
		kgo.FetchMaxWait(500 * time.Millisecond), kgo.RetryTimeout(5 * time.Second),
		kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsAssigned(c.assigned), kgo.OnPartitionsRevoked(c.revoked), kgo.OnPartitionsLost(c.lost),
	}
	if len(cfg.Balancers) > 0 {
		opts = append(opts, kgo.Balancers(cfg.Balancers...))
	}
	if cfg.InstanceID != "" {
		opts = append(opts, kgo.InstanceID(cfg.InstanceID))
	}
	if cfg.ServerSide {
		opts = append(opts, kgo.ServerSideBalancer())
		if len(cfg.Balancers) == 0 {
			opts = append(opts, kgo.Balancers(kgo.CooperativeStickyBalancer()))
		}
	}
	cl, err := kgo.NewClient(append(opts, cfg.Opts...)...)
	if err != nil {
		return nil, err
	}
	c.cl = cl
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	go c.run(ctx)
	return c, nil
}

// Name is the consumer's name (its client id).
func (c *Consumer) Name() string { return c.cfg.Name }

// Client is the consumer's franz-go client.
func (c *Consumer) Client() *kgo.Client { return c.cl }

// Output is the consumer's log so far.
func (c *Consumer) Output() string { return c.out.String() }

// Log is the consumer's log so far, parsed.
func (c *Consumer) Log() *Log { return Parse(c.cfg.Name, c.out.String()) }

func (c *Consumer) logf(format string, args ...any) {
	if !c.dead.Load() {
		c.out.Printf(format, args...)
	}
}

func now() string { return Micros(time.Now()) }

func (c *Consumer) run(ctx context.Context) {
	defer close(c.done)
	for {
		// Wake up at least every commit interval, to commit by time when
		// no more records come.
		pctx, cancel := context.WithTimeout(ctx, c.cfg.CommitInterval)
		fs := c.cl.PollRecords(pctx, 1000)
		cancel()
		if ctx.Err() != nil || fs.IsClientClosed() {
			c.cl.AllowRebalance()
			return
		}
		c.mu.Lock()
		fs.EachRecord(func(r *kgo.Record) {
			c.logf("processed %d %d %s %s", r.Partition, r.Offset, r.Key, r.Value)
			c.next[r.Partition] = r.Offset + 1
			c.since++
		})
		due := c.since >= c.cfg.CommitEvery || time.Since(c.lastCommit) >= c.cfg.CommitInterval
		c.mu.Unlock()
		if due {
			c.commit(nil)
		}
		c.cl.AllowRebalance()
	}
}

// commit commits what was processed of the owned partitions (of only,
// when given) and not yet committed, waiting for the answer.
func (c *Consumer) commit(only []int32) {
	if c.dead.Load() {
		return
	}
	c.mu.Lock()
	offs := map[int32]kgo.EpochOffset{}
	add := func(p int32) {
		if n, ok := c.next[p]; ok && n > c.committed[p] {
			offs[p] = kgo.EpochOffset{Epoch: -1, Offset: n}
		}
	}
	if only == nil {
		for p := range c.next {
			add(p)
		}
	} else {
		for _, p := range only {
			add(p)
		}
	}
	c.since, c.lastCommit = 0, time.Now()
	c.mu.Unlock()
	if len(offs) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c.cl.CommitOffsetsSync(ctx, map[string]map[int32]kgo.EpochOffset{c.cfg.Topic: offs},
		func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			if err != nil {
				c.logf("commitfailed %s %v", now(), err)
				return
			}
			ok := map[int32]int64{}
			var failed []string
			for _, t := range resp.Topics {
				for _, p := range t.Partitions {
					if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
						failed = append(failed, fmt.Sprintf("%d:%v", p.Partition, err))
						continue
					}
					if eo, in := offs[p.Partition]; in {
						ok[p.Partition] = eo.Offset
					}
				}
			}
			c.mu.Lock()
			defer c.mu.Unlock()
			for p, o := range ok {
				if _, owned := c.next[p]; owned {
					c.committed[p] = max(c.committed[p], o)
				}
			}
			if len(ok) > 0 {
				c.logf("committed %s %s", now(), FormatOffsets(ok))
			}
			if len(failed) > 0 {
				c.logf("commitfailed %s %v", now(), failed)
			}
		})
}

func (c *Consumer) assigned(_ context.Context, _ *kgo.Client, ps map[string][]int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range ps[c.cfg.Topic] {
		delete(c.next, p)
		c.committed[p] = -1
	}
	c.logf("assigned %s %s", now(), FormatParts(ps[c.cfg.Topic]))
}

func (c *Consumer) revoked(_ context.Context, _ *kgo.Client, ps map[string][]int32) {
	if c.dead.Load() {
		return
	}
	parts := ps[c.cfg.Topic]
	c.commit(parts)
	c.forget(parts, Revoked)
}

func (c *Consumer) lost(_ context.Context, _ *kgo.Client, ps map[string][]int32) {
	c.forget(ps[c.cfg.Topic], Lost)
}

func (c *Consumer) forget(parts []int32, k Kind) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range parts {
		delete(c.next, p)
		delete(c.committed, p)
	}
	c.logf("%s %s %s", k, now(), FormatParts(parts))
}

// Owned is the consumer's assignment by its log.
func (c *Consumer) Owned() []int32 { return c.Log().Owned() }

// Stop stops polling, commits what was processed, and closes the client,
// which leaves the group (a dynamic member) after a final revoke. It
// returns nil: the error is there for Member.
func (c *Consumer) Stop() error {
	c.stopOnce.Do(func() {
		c.cancel()
		<-c.done
		c.commit(nil)
		c.cl.CloseAllowingRebalance()
		c.logf("closed %s", now())
		close(c.closed)
	})
	return nil
}

// Kill cuts the client off at once: no commit, no LeaveGroup; its log ends
// here. The client's goroutines are reaped in the background (Wait).
func (c *Consumer) Kill() {
	c.stopOnce.Do(func() {
		c.dead.Store(true)
		c.ks.Kill()
		c.cancel()
		go func() {
			<-c.done
			c.cl.CloseAllowingRebalance()
			close(c.closed)
		}()
	})
}

// Flap cuts the client's connections once; it goes on, reconnecting.
func (c *Consumer) Flap() { c.ks.Flap() }

// Wait waits until the client is closed (after Stop or Kill).
func (c *Consumer) Wait() { <-c.closed }
