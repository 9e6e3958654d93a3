package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The mirror workload's third measure: is the group's committed offset on
// a target where the group stopped at the source?
//
// An offset means something only in its own log. At the source the group
// committed S: it has processed every committed record below S and will
// process those from S on. On a target it finds T. What it would do there
// is what a read_committed consumer starting at T reads: each record is
// known by its payload (sequence number and send time, unique in the run),
// so it is one the group has processed (a duplicate), one still due (due),
// or one the source never delivered to read_committed consumers: a record
// of an aborted transaction, counted apart. Due records it does not read
// there are skipped. A partition is exact when nothing is skipped or
// duplicated, ahead when records are skipped, behind when records are
// processed again.

// recordID is a record's identity across clusters: the first 16 bytes of
// its payload, sequence number and send time.
type recordID [payloadHeader]byte

func idOf(v []byte) recordID {
	var id recordID
	copy(id[:], v)
	return id
}

// idRecord is a record as read from one cluster: its offset there and its
// identity.
type idRecord struct {
	Offset int64
	ID     recordID
}

// offsetResult is the group's committed offsets on one target, judged
// against the source's.
type offsetResult struct {
	Partitions int `json:"partitions"`
	Exact      int `json:"exact"`
	Ahead      int `json:"ahead"`   // a consumer starting there would skip records
	Behind     int `json:"behind"`  // it would process records again
	Mixed      int `json:"mixed"`   // both
	Missing    int `json:"missing"` // no committed offset there
	// Identical counts the partitions whose offset is the source's number.
	Identical  int   `json:"identical_offsets"`
	Skipped    int64 `json:"records_skipped"`
	Duplicated int64 `json:"records_duplicated"`
	// AbortedReadable counts the records of aborted source transactions
	// that a read_committed consumer reads on the target (the whole
	// phase, not only past the committed offset).
	AbortedReadable int64 `json:"aborted_records_readable"`
	// SettledSeconds is from the group's commit at the source to the last
	// change of its offsets on the target; -1 when they did not change.
	SettledSeconds float64           `json:"settled_seconds"`
	PerPartition   []partitionOffset `json:"per_partition"`
}

type partitionOffset struct {
	Partition  int32  `json:"partition"`
	Source     int64  `json:"source"`
	Target     int64  `json:"target"` // -1: none
	Verdict    string `json:"verdict"`
	Skipped    int64  `json:"skipped"`
	Duplicated int64  `json:"duplicated"`
}

// judgePartition judges one partition. src holds the source's committed
// records from where the phase began, srcAt is the group's offset there;
// tgt holds what a read_committed consumer reads on the target from
// tgtStart, where the phase began there, tgtAt the group's offset on the
// target (-1: none). Records below tgtStart on the target are all from
// before the phase, which the group had processed.
func judgePartition(src []idRecord, srcAt int64, tgt []idRecord, tgtStart, tgtAt int64) partitionOffset {
	po := partitionOffset{Source: srcAt, Target: tgtAt}
	if tgtAt < 0 {
		po.Verdict = "missing"
		return po
	}
	processed, due := map[recordID]bool{}, map[recordID]bool{}
	for _, r := range src {
		if r.Offset < srcAt {
			processed[r.ID] = true
		} else {
			due[r.ID] = true
		}
	}
	if tgtAt < tgtStart {
		po.Duplicated += tgtStart - tgtAt
	}
	read := 0
	for _, r := range tgt {
		switch {
		case r.Offset < tgtAt:
		case due[r.ID]:
			read++
		case processed[r.ID]:
			po.Duplicated++
		}
	}
	po.Skipped = int64(len(due) - read)
	switch {
	case po.Skipped > 0 && po.Duplicated > 0:
		po.Verdict = "mixed"
	case po.Skipped > 0:
		po.Verdict = "ahead"
	case po.Duplicated > 0:
		po.Verdict = "behind"
	default:
		po.Verdict = "exact"
	}
	return po
}

// judgeOffsets judges every partition of one target.
func judgeOffsets(src map[int32][]idRecord, srcAt map[int32]int64, tgt map[int32][]idRecord, tgtStart, tgtAt map[int32]int64,
	aborted map[recordID]bool, partitions int32) offsetResult {
	res := offsetResult{Partitions: int(partitions)}
	for p := range partitions {
		at, ok := tgtAt[p]
		if !ok {
			at = -1
		}
		po := judgePartition(src[p], srcAt[p], tgt[p], tgtStart[p], at)
		po.Partition = p
		res.PerPartition = append(res.PerPartition, po)
		switch po.Verdict {
		case "exact":
			res.Exact++
		case "ahead":
			res.Ahead++
		case "behind":
			res.Behind++
		case "mixed":
			res.Mixed++
		case "missing":
			res.Missing++
		}
		if at == srcAt[p] {
			res.Identical++
		}
		res.Skipped += po.Skipped
		res.Duplicated += po.Duplicated
		for _, r := range tgt[p] {
			if aborted[r.ID] {
				res.AbortedReadable++
			}
		}
	}
	return res
}

// txnLog is what the transactional producer wrote.
type txnLog struct {
	aborted   map[recordID]bool
	last      map[int32]recordID // each partition's last committed record
	committed []int64            // committed records per partition
}

// writeTransactions writes o.Transactions transactions of o.TxnRecords
// records round-robin over the partitions, every third one aborted (the
// last always committed, so every mirror can be seen to hold the end).
func writeTransactions(ctx context.Context, source string, o mirrorOptions) (txnLog, error) {
	tl := txnLog{aborted: map[recordID]bool{}, last: map[int32]recordID{}, committed: make([]int64, o.Partitions)}
	w := benchWorkload{RecordSize: o.RecordSize, Partitions: o.Partitions, Acks: "all", Idempotent: true, Compression: "none",
		Linger: time.Millisecond, BatchBytes: 1 << 20, MaxBufferedBytes: 32 << 20}
	cl, err := kgo.NewClient(append(producerOpts(source, w), kgo.TransactionalID(mirrorTxnID))...)
	if err != nil {
		return tl, err
	}
	defer cl.Close()
	var (
		failed atomic.Int64
		first  atomic.Value
		seqs   = make([]int64, o.Partitions)
		n      int64
	)
	promise := func(_ *kgo.Record, err error) {
		if err != nil && failed.Add(1) == 1 {
			first.Store(err)
		}
	}
	for i := range o.Transactions {
		commit := i%3 != 1 || i == o.Transactions-1
		if err := cl.BeginTransaction(); err != nil {
			return tl, fmt.Errorf("transaction %d: %w", i+1, err)
		}
		var ids []idRecord // Offset holds the partition here
		for range o.TxnRecords {
			p := int32(n % int64(o.Partitions))
			n++
			v := make([]byte, o.RecordSize)
			fillPayload(v, p, seqs[p], monoNow())
			seqs[p]++
			ids = append(ids, idRecord{Offset: int64(p), ID: idOf(v)})
			cl.Produce(ctx, &kgo.Record{Topic: mirrorTopic, Partition: p, Value: v}, promise)
		}
		if err := cl.Flush(ctx); err != nil {
			return tl, err
		}
		if failed.Load() > 0 {
			return tl, fmt.Errorf("transaction %d: %d records failed; first: %v", i+1, failed.Load(), first.Load())
		}
		end := kgo.TryAbort
		if commit {
			end = kgo.TryCommit
		}
		if err := cl.EndTransaction(ctx, end); err != nil {
			return tl, fmt.Errorf("transaction %d: ending it: %w", i+1, err)
		}
		for _, r := range ids {
			if commit {
				tl.committed[r.Offset]++
				tl.last[int32(r.Offset)] = r.ID
			} else {
				tl.aborted[r.ID] = true
			}
		}
	}
	return tl, nil
}

// groupPositions is how many committed records the group reads in each
// partition before it commits: a different share of each partition, so
// that the positions fall in different places (after a commit marker, in
// front of an aborted transaction, in the middle of a transaction).
func groupPositions(committed []int64) []int64 {
	k := make([]int64, len(committed))
	for p, n := range committed {
		k[p] = min(max(1, n*int64(p+1)/int64(len(committed)+1)), n)
	}
	return k
}

// consumeAndCommit runs the group at the source with read_committed until
// it has read want[p] records of each partition, commits the offset after
// the last of them per partition, and leaves the group. It returns the
// offsets committed.
func consumeAndCommit(ctx context.Context, source string, want []int64) (map[int32]int64, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(source), dialer, kgo.ConsumerGroup(mirrorGroup), kgo.ConsumeTopics(mirrorTopic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.DisableAutoCommit(), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		return nil, err
	}
	defer cl.Close() // leaves the group
	got := make([]int64, len(want))
	last := map[int32]*kgo.Record{}
	for len(last) < len(want) {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil, fmt.Errorf("the group read %v of %v records: %w", got, want, ctx.Err())
		}
		var problem error
		fs.EachError(func(t string, p int32, err error) {
			problem = cmpOr(problem, fmt.Errorf("fetching %s/%d: %w", t, p, err))
		})
		if problem != nil {
			return nil, problem
		}
		fs.EachRecord(func(r *kgo.Record) {
			if p := r.Partition; got[p] < want[p] {
				got[p]++
				if got[p] == want[p] {
					last[p] = r
				}
			}
		})
	}
	at := map[int32]int64{}
	offs := map[string]map[int32]kgo.EpochOffset{mirrorTopic: {}}
	for p, r := range last {
		offs[mirrorTopic][p] = kgo.EpochOffset{Epoch: r.LeaderEpoch, Offset: r.Offset + 1}
		at[p] = r.Offset + 1
	}
	var cerr error
	cl.CommitOffsetsSync(ctx, offs, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		cerr = err
		if resp == nil {
			return
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				cerr = cmpOr(cerr, kerr.ErrorForCode(p.ErrorCode))
			}
		}
	})
	if cerr != nil {
		return nil, fmt.Errorf("committing: %w", cerr)
	}
	return at, nil
}

// readIDs reads each partition with read_committed from start until it
// has seen the record last names, and returns every record read.
func readIDs(ctx context.Context, addr string, start map[int32]int64, last map[int32]recordID) (map[int32][]idRecord, error) {
	offsets := map[int32]kgo.Offset{}
	for p, at := range start {
		offsets[p] = kgo.NewOffset().At(at)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), dialer, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{mirrorTopic: offsets}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	out := map[int32][]idRecord{}
	done := map[int32]bool{}
	for p := range start {
		if _, ok := last[p]; !ok {
			done[p] = true
		}
	}
	for len(done) < len(start) {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			var missing []string
			for p := range start {
				if !done[p] {
					missing = append(missing, fmt.Sprintf("%d (%d records read)", p, len(out[p])))
				}
			}
			slices.Sort(missing)
			return nil, fmt.Errorf("%s: the last committed record not read in partitions %s: %w", addr, strings.Join(missing, ", "), ctx.Err())
		}
		var problem error
		fs.EachError(func(t string, p int32, err error) {
			problem = cmpOr(problem, fmt.Errorf("fetching %s/%d: %w", t, p, err))
		})
		if problem != nil {
			return nil, problem
		}
		fs.EachRecord(func(r *kgo.Record) {
			id := idOf(r.Value)
			out[r.Partition] = append(out[r.Partition], idRecord{Offset: r.Offset, ID: id})
			if id == last[r.Partition] {
				done[r.Partition] = true
			}
		})
	}
	return out, nil
}

// committedOffsets is the group's committed offsets of the topic (none:
// absent from the map).
func committedOffsets(ctx context.Context, adm *kadm.Client, group, topic string) (map[int32]int64, error) {
	fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := adm.FetchOffsets(fctx, group)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	resp.Each(func(o kadm.OffsetResponse) {
		if o.Topic == topic && o.At >= 0 {
			out[o.Partition] = o.At
		}
	})
	return out, nil
}

// watchCommitted polls the group's offsets on each target every 100 ms
// until wait has passed since from, and returns the last seen and when
// each last changed (zero: never, against base).
func watchCommitted(ctx context.Context, adms []*kadm.Client, base []map[int32]int64, from time.Time, wait time.Duration) ([]map[int32]int64, []time.Time, error) {
	cur := slices.Clone(base)
	changed := make([]time.Time, len(adms))
	deadline := from.Add(wait)
	for {
		for i, adm := range adms {
			got, err := committedOffsets(ctx, adm, mirrorGroup, mirrorTopic)
			if err != nil {
				continue // a passing failure; the next poll tells
			}
			if !maps.Equal(got, cur[i]) {
				cur[i], changed[i] = got, time.Now()
			}
		}
		if time.Now().After(deadline) {
			return cur, changed, nil
		}
		select {
		case <-ctx.Done():
			return cur, changed, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// measureOffsets is the third measure (see the top of this file).
func measureOffsets(ctx context.Context, o mirrorOptions, rep *mirrorReport, source string, src *kadm.Client, targets []string, adms []*kadm.Client, logf func(string, ...any)) error {
	srcStart, err := listEnds(ctx, src, mirrorTopic)
	if err != nil {
		return err
	}
	tgtStarts := make([]map[int32]int64, len(adms))
	for i, adm := range adms {
		if tgtStarts[i], err = listEnds(ctx, adm, mirrorTopic); err != nil {
			return err
		}
	}
	// The group has read everything so far, as if it had kept up.
	if err := commitGroup(ctx, src, mirrorGroup, mirrorTopic, srcStart); err != nil {
		return fmt.Errorf("moving the group to the end: %w", err)
	}
	logf("offsets: %d transactions of %d records (every third aborted), then the group reads part of them and commits", o.Transactions, o.TxnRecords)
	tl, err := writeTransactions(ctx, source, o)
	if err != nil {
		return fmt.Errorf("transactions: %w", err)
	}
	base := make([]map[int32]int64, len(adms))
	for i, adm := range adms {
		base[i], _ = committedOffsets(ctx, adm, mirrorGroup, mirrorTopic)
	}
	srcAt, err := consumeAndCommit(ctx, source, groupPositions(tl.committed))
	if err != nil {
		return fmt.Errorf("the group: %w", err)
	}
	committedAt := time.Now()
	if got, err := committedOffsets(ctx, src, mirrorGroup, mirrorTopic); err != nil || !maps.Equal(got, srcAt) {
		return fmt.Errorf("the group's offsets at the source: %v (%v), committed %v", got, err, srcAt)
	}

	// Watch the targets while reading every side's records.
	var (
		final   []map[int32]int64
		changed []time.Time
		werr    error
		wg      sync.WaitGroup
	)
	wg.Go(func() { final, changed, werr = watchCommitted(ctx, adms, base, committedAt, o.OffsetWait) })
	srcRecs, err := readIDs(ctx, source, srcStart, tl.last)
	var tgtRecs []map[int32][]idRecord
	for i, addr := range targets {
		if err != nil {
			break
		}
		var recs map[int32][]idRecord
		recs, err = readIDs(ctx, addr, tgtStarts[i], tl.last)
		tgtRecs = append(tgtRecs, recs)
	}
	wg.Wait()
	if err != nil {
		return err
	}
	if werr != nil {
		return werr
	}
	for i := range adms {
		res := judgeOffsets(srcRecs, srcAt, tgtRecs[i], tgtStarts[i], final[i], tl.aborted, o.Partitions)
		res.SettledSeconds = -1
		if !changed[i].IsZero() {
			res.SettledSeconds = changed[i].Sub(committedAt).Seconds()
		}
		m := &rep.Mirrors[i]
		m.Offset = res
		logf("  %s: %d of %d partitions exact, %d ahead, %d behind, %d mixed, %d missing; %d records would be skipped, %d processed again; %d aborted records readable; offsets last changed %.1f s after the commit",
			m.Label, res.Exact, res.Partitions, res.Ahead, res.Behind, res.Mixed, res.Missing, res.Skipped, res.Duplicated, res.AbortedReadable, res.SettledSeconds)
	}
	var bad []string
	for _, m := range rep.Mirrors {
		if m.Offset.Missing > 0 {
			bad = append(bad, fmt.Sprintf("%s: no committed offset in %d partitions %.0f s after the commit", m.Label, m.Offset.Missing, o.OffsetWait.Seconds()))
		}
	}
	if len(bad) > 0 {
		// Reported, and judged as missing, but not a failure of the run:
		// it is what a consumer moving there would find.
		logf("  %s", strings.Join(bad, "; "))
	}
	return nil
}
