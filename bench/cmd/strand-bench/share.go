package main

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The share group workload (g): KIP-932 share groups, a queue. It turns
// share groups on in the broker (share.version 1) and sets the group's
// share.auto.offset.reset to earliest. Then, in two phases, with
// w.ShareConsumers members of one share group (franz-go, kgo.ShareGroup)
// that accept every record they receive:
//
//  1. Throughput. w.Records records are produced first, not timed. Then
//     the members start and drain them: the time from their start to the
//     last record accepted (MarkAcks), in records/s and MB/s of payload.
//  2. End-to-end latency. The same members stay on while records are
//     produced at w.Rate for w.Duration. A record's latency is the time
//     its member's poll returned it minus the send time in its payload.
//     Records sent during w.Warmup are received and checked but not timed.
//
// A share group delivers each record at least once: a record is received
// again when its acknowledgement is lost or its acquisition lock runs out.
// Every record must arrive with the payload that was sent; records received
// more than once are counted. A record that has not arrived within
// shareStall of the last new one fails the workload.

// shareStall is how long the members may go without a new record before
// the records still missing fail the workload. It is longer than the 30 s
// acquisition lock of Kafka's defaults, so a record whose lock runs out is
// delivered again in time.
const shareStall = 60 * time.Second

// shareGroupName is the share group of a workload's topic: one per topic,
// so no round finds a group another round started.
func shareGroupName(topic string) string { return topic + "-share" }

func (w benchWorkload) describeShare() string {
	return fmt.Sprintf("%s × %s drained by %d share consumers, then %d rec/s for %s; %d partitions, acks=%s, %s, linger %s (backlog) and 0 (fixed rate), idempotent",
		countStr(w.Records), bytesStr(w.RecordSize), w.ShareConsumers, w.Rate, w.Duration, w.Partitions, w.Acks, w.Compression, w.Linger)
}

func (w benchWorkload) validateShare() error {
	if w.Records < 1 {
		return errors.New("share groups: no records for the backlog")
	}
	if w.Rate < 1 || w.Duration <= w.Warmup {
		return fmt.Errorf("share groups: rate %d for %s: want a rate and a duration longer than the %s warm-up", w.Rate, w.Duration, w.Warmup)
	}
	return nil
}

// runShareWorkload is runWorkload for w.ShareConsumers > 0 (the topic
// exists).
func runShareWorkload(ctx context.Context, addr, topic string, w benchWorkload, brokerCPU func() time.Duration, res *benchResult) error {
	if err := w.validateShare(); err != nil {
		return err
	}
	group := shareGroupName(topic)
	if err := enableShareGroup(ctx, addr, group); err != nil {
		return err
	}
	if len(w.StateConfigs) > 0 {
		if err := setShareStateConfigs(ctx, addr, topic, group, w.StateConfigs); err != nil {
			return err
		}
	}

	// Records go round-robin from 0 in each produce call, so record i of a
	// call is in partition i mod partitions with sequence number i div
	// partitions; the live records follow the backlog in each partition.
	liveTotal := w.total()
	backlog := splitCounts(w.Records, w.Partitions)
	live := splitCounts(liveTotal, w.Partitions)
	t := newShareTracker(w, backlog, live)
	res.Records = w.Records + liveTotal
	res.PayloadBytes = res.Records * int64(w.RecordSize)

	bw := w
	bw.Rate = 0
	if _, _, _, err := produce(ctx, addr, topic, bw, w.Records); err != nil {
		return fmt.Errorf("producing the backlog: %w", err)
	}

	mctx, stop := context.WithCancel(ctx)
	defer stop()
	errs := make(chan error, w.ShareConsumers)
	var (
		members []*shareMember
		wg      sync.WaitGroup
	)
	closeAll := func() {
		var cw sync.WaitGroup
		for _, m := range members {
			cw.Go(m.cl.Close)
		}
		cw.Wait()
		members = nil
	}
	defer func() {
		// On an error return: stop polling, then leave the group.
		stop()
		wg.Wait()
		closeAll()
	}()

	start := monoNow()
	b0, c0 := readCPU(brokerCPU), selfCPU()
	for range w.ShareConsumers {
		m, err := newShareMember(addr, topic, group, t)
		if err != nil {
			return err
		}
		members = append(members, m)
		wg.Go(func() {
			if err := m.run(mctx, t); err != nil {
				errs <- err
			}
		})
	}
	if err := t.wait(ctx, t.backlogDone, errs); err != nil {
		return fmt.Errorf("draining the backlog: %w", err)
	}
	b1, c1 := readCPU(brokerCPU), selfCPU()
	res.ConsumeSeconds = time.Duration(t.backlogAt.Load() - start).Seconds()
	res.ConsumeRecordsPerSec = float64(w.Records) / res.ConsumeSeconds
	res.ConsumeMBPerSec = float64(w.Records*int64(w.RecordSize)) / 1e6 / res.ConsumeSeconds
	res.ConsumeClientCPUSeconds = (c1 - c0).Seconds()
	if b0 >= 0 && b1 >= 0 {
		res.ConsumeBrokerCPUSeconds = (b1 - b0).Seconds()
	}

	// The live phase: linger 0, as in (d), so a record is sent at once.
	lw := w
	lw.Linger = 0
	t.warmupTS.Store(monoNow() + int64(w.Warmup))
	b0, c0 = readCPU(brokerCPU), selfCPU()
	pstart, pend, lat, err := produce(ctx, addr, topic, lw, liveTotal)
	if err != nil {
		return fmt.Errorf("producing at %d records/s: %w", w.Rate, err)
	}
	b1, c1 = readCPU(brokerCPU), selfCPU()
	res.ProduceSeconds = pend.Sub(pstart).Seconds()
	res.ProduceRecordsPerSec = float64(liveTotal) / res.ProduceSeconds
	res.ProduceMBPerSec = float64(liveTotal*int64(w.RecordSize)) / 1e6 / res.ProduceSeconds
	res.AchievedRate = res.ProduceRecordsPerSec
	res.ProduceP50Ms, res.ProduceP99Ms, res.ProduceP999Ms = percentilesMs(lat)
	res.ClientCPUSeconds = (c1 - c0).Seconds()
	if b0 >= 0 && b1 >= 0 {
		res.BrokerCPUSeconds = (b1 - b0).Seconds()
	}
	if err := t.wait(ctx, t.allDone, errs); err != nil {
		return fmt.Errorf("reading along at %d records/s: %w", w.Rate, err)
	}

	// Stop polling, send the last acknowledgements, and leave the group.
	stop()
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
	}
	var e2e []uint32
	for _, m := range members {
		e2e = append(e2e, m.e2e...)
	}
	fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var fw sync.WaitGroup
	flushErrs := make([]error, len(members))
	for i, m := range members {
		fw.Go(func() { flushErrs[i] = m.cl.FlushAcks(fctx) })
	}
	fw.Wait()
	if err := errors.Join(flushErrs...); err != nil {
		return fmt.Errorf("flushing acknowledgements: %w", err)
	}
	closeAll()

	res.E2EP50Ms, res.E2EP99Ms, res.E2EMaxMs = lagPercentiles(e2e)
	_, _, res.E2EP999Ms = percentilesMs(e2e)
	res.Redelivered = t.redelivered.Load()
	res.AckErrors = t.ackErrors.Load()
	counts := make([]int64, w.Partitions)
	for p := range counts {
		counts[p] = backlog[p] + live[p]
	}
	return checkEndOffsets(ctx, addr, topic, counts, nil)
}

// enableShareGroup turns share groups on (share.version 1, unless the
// broker is there already) and sets the group's share.auto.offset.reset
// to earliest, so the group starts at the records produced before it.
// Then it waits until every broker serves both: in a cluster they reach
// the brokers through the metadata log, and a partition's leader reads the
// reset policy once, when the group first fetches from it.
func enableShareGroup(ctx context.Context, addr, group string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), dialer)
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if level, err := shareVersion(ctx, adm); err != nil {
		return err
	} else if level < 1 {
		up, err := adm.UpdateFeatures(ctx, false, kadm.FeatureUpdate{Feature: "share.version", MaxVersionLevel: 1, UpgradeType: 1})
		if err == nil {
			err = up.Error()
		}
		if err != nil {
			return fmt.Errorf("UpdateFeatures share.version=1: %w", err)
		}
	}

	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Value = "share.auto.offset.reset", kmsg.StringPtr("earliest")
	rr.Configs = append(rr.Configs, c)
	req.Resources = append(req.Resources, rr)
	resp, err := req.RequestWith(ctx, cl)
	if err == nil && len(resp.Resources) != 1 {
		err = fmt.Errorf("%d resources in the answer, want 1", len(resp.Resources))
	}
	if err == nil {
		err = kerr.ErrorForCode(resp.Resources[0].ErrorCode)
	}
	if err != nil {
		return fmt.Errorf("setting share.auto.offset.reset=earliest on group %s: %w", group, err)
	}

	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var last error
	for {
		if last = shareReady(wctx, cl, group); last == nil {
			return nil
		}
		select {
		case <-wctx.Done():
			return fmt.Errorf("share groups not served within a minute: %w", last)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// setShareStateConfigs sets configs on __share_group_state before the
// clock starts. Kafka creates that topic on first use: a FindCoordinator
// of the share type (2) for one of the group's share-partitions, as a
// broker sends it, makes it; then every partition is waited for.
func setShareStateConfigs(ctx context.Context, addr, topic, group string, configs map[string]string) error {
	const stateTopic = "__share_group_state"
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), dialer)
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	td, err := adm.ListTopics(ctx, topic)
	if err == nil {
		err = td[topic].Err
	}
	if err != nil {
		return fmt.Errorf("the topic id of %s: %w", topic, err)
	}
	id := td[topic].ID
	key := group + ":" + base64.RawURLEncoding.EncodeToString(id[:]) + ":0"
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorType, req.CoordinatorKey, req.CoordinatorKeys = 2, key, []string{key}
		resp, err := req.RequestWith(wctx, cl)
		if err == nil && len(resp.Coordinators) == 1 {
			err = kerr.ErrorForCode(resp.Coordinators[0].ErrorCode)
		}
		if err == nil {
			break
		}
		select {
		case <-wctx.Done():
			return fmt.Errorf("the share coordinator of %s: %w", key, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	if err := waitTopicOnline(wctx, adm, stateTopic, 0); err != nil {
		return err
	}
	return alterTopicConfigs(ctx, cl, stateTopic, configs)
}

// shareVersion is the lowest finalized share.version level among the
// brokers (0 when a broker lists none).
func shareVersion(ctx context.Context, adm *kadm.Client) (int16, error) {
	vs, err := adm.ApiVersions(ctx)
	if err != nil {
		return 0, fmt.Errorf("ApiVersions: %w", err)
	}
	if len(vs) == 0 {
		return 0, errors.New("ApiVersions: no brokers")
	}
	level := int16(math.MaxInt16)
	for _, v := range vs {
		if v.Err != nil {
			return 0, fmt.Errorf("ApiVersions of broker %d: %w", v.NodeID, v.Err)
		}
		l := int16(0)
		for _, f := range v.Raw().FinalizedFeatures {
			if f.Name == "share.version" {
				l = f.MaxVersionLevel
			}
		}
		level = min(level, l)
	}
	return level, nil
}

// shareReady says why a broker does not serve the share group yet: it
// does not list share.version 1, or does not describe the group's
// share.auto.offset.reset as earliest.
func shareReady(ctx context.Context, cl *kgo.Client, group string) error {
	adm := kadm.NewClient(cl)
	if level, err := shareVersion(ctx, adm); err != nil {
		return err
	} else if level < 1 {
		return fmt.Errorf("a broker lists share.version %d", level)
	}
	m, err := adm.BrokerMetadata(ctx)
	if err != nil {
		return err
	}
	for _, id := range m.Brokers.NodeIDs() {
		req := kmsg.NewPtrDescribeConfigsRequest()
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
		rr.ConfigNames = []string{"share.auto.offset.reset"}
		req.Resources = append(req.Resources, rr)
		resp, err := req.RequestWith(ctx, cl.Broker(int(id)))
		if err != nil {
			return fmt.Errorf("DescribeConfigs of group %s at broker %d: %w", group, id, err)
		}
		var value string
		for _, r := range resp.Resources {
			if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
				return fmt.Errorf("DescribeConfigs of group %s at broker %d: %w", group, id, err)
			}
			for _, c := range r.Configs {
				if c.Name == "share.auto.offset.reset" && c.Value != nil {
					value = *c.Value
				}
			}
		}
		if value != "earliest" {
			return fmt.Errorf("broker %d describes share.auto.offset.reset of group %s as %q", id, group, value)
		}
	}
	return nil
}

// shareTracker counts what the members receive: every record of the
// topic, known by partition and offset, and how often it arrived.
type shareTracker struct {
	w       benchWorkload
	backlog []int64    // per partition: the backlog's records, at the first offsets
	counts  []int64    // per partition: backlog and live records
	seen    [][]uint32 // per partition and offset: times received
	// backlogN and totalN are the distinct records at which the backlog,
	// and everything, has been received.
	backlogN, totalN int64
	received         atomic.Int64 // distinct records received
	redelivered      atomic.Int64 // distinct records received more than once
	lastNew          atomic.Int64 // monoNow of the last first receipt
	// warmupTS: records sent before it (monoNow) are not timed. The
	// backlog never is.
	warmupTS    atomic.Int64
	backlogAt   atomic.Int64 // monoNow when the last backlog record was accepted
	backlogDone chan struct{}
	allDone     chan struct{}
	ackErrors   atomic.Int64 // partitions' acknowledgements the broker refused
}

func newShareTracker(w benchWorkload, backlog, live []int64) *shareTracker {
	t := &shareTracker{w: w, backlog: backlog, counts: make([]int64, len(backlog)), seen: make([][]uint32, len(backlog)),
		backlogDone: make(chan struct{}), allDone: make(chan struct{})}
	for p := range backlog {
		t.counts[p] = backlog[p] + live[p]
		t.seen[p] = make([]uint32, t.counts[p])
		t.backlogN += backlog[p]
		t.totalN += t.counts[p]
	}
	t.warmupTS.Store(math.MaxInt64)
	t.lastNew.Store(monoNow())
	return t
}

// check reports what is wrong with a received record, or nil.
func (t *shareTracker) check(r *kgo.Record) error {
	p := r.Partition
	if p < 0 || int(p) >= len(t.counts) {
		return fmt.Errorf("record from partition %d", p)
	}
	if r.Offset < 0 || r.Offset >= t.counts[p] {
		return fmt.Errorf("partition %d: offset %d, beyond the %d records produced", p, r.Offset, t.counts[p])
	}
	seq := r.Offset
	if seq >= t.backlog[p] {
		seq -= t.backlog[p]
	}
	if msg := checkPayload(r.Value, p, seq, t.w.RecordSize); msg != "" {
		return fmt.Errorf("partition %d offset %d: %s", p, r.Offset, msg)
	}
	return nil
}

// accepted counts a checked record accepted at now; first says whether it
// is the record's first receipt.
func (t *shareTracker) accepted(r *kgo.Record, now int64) (first bool) {
	if n := atomic.AddUint32(&t.seen[r.Partition][r.Offset], 1); n > 1 {
		if n == 2 {
			t.redelivered.Add(1)
		}
		return false
	}
	t.lastNew.Store(now)
	// Each count is reached once, by one caller. The live phase has at
	// least one record, so the two counts differ.
	switch t.received.Add(1) {
	case t.backlogN:
		t.backlogAt.Store(now)
		close(t.backlogDone)
	case t.totalN:
		close(t.allDone)
	}
	return true
}

// wait returns when done is closed, at a member's error, or with the
// records still missing once none has arrived for shareStall.
func (t *shareTracker) wait(ctx context.Context, done <-chan struct{}, errs <-chan error) error {
	since := monoNow()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return nil
		case err := <-errs:
			return err
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
			if idle := time.Duration(monoNow() - max(t.lastNew.Load(), since)); idle > shareStall {
				return fmt.Errorf("no new record for %s, %d of %d records never received: %s",
					idle.Round(time.Second), t.totalN-t.received.Load(), t.totalN, t.missing())
			}
		}
	}
}

// missing names the first records not received, by partition.
func (t *shareTracker) missing() string {
	var out []string
	for p, seen := range t.seen {
		n, first := 0, int64(-1)
		for o := range seen {
			if atomic.LoadUint32(&seen[o]) == 0 {
				if first < 0 {
					first = int64(o)
				}
				n++
			}
		}
		if n > 0 {
			out = append(out, fmt.Sprintf("partition %d: %d records from offset %d", p, n, first))
		}
	}
	return strings.Join(out, "; ")
}

// shareMember is one consumer of the share group.
type shareMember struct {
	cl  *kgo.Client
	e2e []uint32 // microseconds per timed record, at its first receipt
}

func newShareMember(addr, topic, group string, t *shareTracker) (*shareMember, error) {
	m := &shareMember{}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(addr), dialer,
		kgo.ShareGroup(group),
		kgo.ConsumeTopics(topic),
		// As (d)'s consumer: a fetch waits at most this long for records,
		// and acknowledgements ride on the next fetch.
		kgo.FetchMaxWait(500*time.Millisecond),
		kgo.FetchMaxBytes(64<<20),
		kgo.FetchMaxPartitionBytes(8<<20),
		// The client retries what it can; an acknowledgement that still
		// fails ends here, and its records come again when their locks
		// run out (counted as redelivered then).
		kgo.ShareAckCallback(func(_ *kgo.Client, rs kgo.ShareAckResults) {
			for _, r := range rs {
				if r.Err != nil {
					t.ackErrors.Add(1)
				}
			}
		}),
	)
	if err != nil {
		return nil, err
	}
	m.cl = cl
	return m, nil
}

// run polls until ctx ends, checks every record and accepts it.
func (m *shareMember) run(ctx context.Context, t *shareTracker) error {
	var recs []*kgo.Record
	for {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		fs := m.cl.PollFetches(pctx)
		cancel()
		now := monoNow()
		var problem error
		fs.EachError(func(topic string, p int32, err error) {
			if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) || errors.Is(err, kgo.ErrClientClosed) {
				return
			}
			if problem == nil {
				problem = fmt.Errorf("share fetch %s/%d: %w", topic, p, err)
			}
		})
		if problem != nil {
			return problem
		}
		recs = recs[:0]
		fs.EachRecord(func(r *kgo.Record) {
			if problem == nil {
				problem = t.check(r)
			}
			recs = append(recs, r)
		})
		if problem != nil {
			return problem
		}
		if len(recs) > 0 {
			m.cl.MarkAcks(kgo.AckAccept, recs...)
			acceptedAt := monoNow()
			warm := t.warmupTS.Load()
			for _, r := range recs {
				if t.accepted(r, acceptedAt) {
					if ts := int64(binary.BigEndian.Uint64(r.Value[8:16])); ts >= warm {
						m.e2e = append(m.e2e, uint32(min((now-ts)/1000, math.MaxUint32)))
					}
				}
			}
		}
		if ctx.Err() != nil {
			return nil
		}
	}
}
