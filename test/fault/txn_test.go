package fault

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandlog/strand/internal/testutil"
)

const (
	txnTopic   = "faults-txn"
	txnRecords = 4 // records per transaction, spread over the topic's partitions
	// Every abortEvery-th transaction is aborted on purpose: none of its
	// records may ever be read committed.
	abortEvery = 5
)

// txnWorkload is one transactional producer writing transactions of
// txnRecords records "t<n>-<i>" across partitions and committing them
// (aborting every abortEvery-th), through the faults, as a stream
// processor's output would be. A failed transaction is aborted, or the
// producer made again under its transactional id, which fences and ends
// what it left open.
type txnWorkload struct {
	t     *testing.T
	seeds []string

	mu        sync.Mutex
	committed map[int]bool // commit acknowledged
	aborted   map[int]bool // aborted on purpose, the abort acknowledged
	unknown   int          // ended by an error: either outcome is fine
	remade    int          // producers made again after a failure

	stopc chan struct{}
	wg    sync.WaitGroup
}

func newTxnWorkload(t *testing.T, seeds []string) *txnWorkload {
	return &txnWorkload{t: t, seeds: seeds, committed: map[int]bool{}, aborted: map[int]bool{}, stopc: make(chan struct{})}
}

func (w *txnWorkload) client() (*kgo.Client, error) {
	return kgo.NewClient(kgo.SeedBrokers(w.seeds...), kgo.MetadataMinAge(250*time.Millisecond),
		kgo.TransactionalID("faults-txn"), kgo.TransactionTimeout(20*time.Second), kgo.DefaultProduceTopic(txnTopic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProduceRequestTimeout(3*time.Second),
		kgo.RequestTimeoutOverhead(2*time.Second), kgo.RecordDeliveryTimeout(30*time.Second))
}

func (w *txnWorkload) start(ctx context.Context) { w.wg.Go(func() { w.run(ctx) }) }

func (w *txnWorkload) stop() {
	close(w.stopc)
	w.wg.Wait()
}

func (w *txnWorkload) run(ctx context.Context) {
	cl, err := w.client()
	if err != nil {
		w.t.Error(err)
		return
	}
	defer func() { cl.Close() }()
	for n := 0; ; n++ {
		select {
		case <-w.stopc:
			return
		case <-time.After(20 * time.Millisecond):
		}
		abort := n%abortEvery == abortEvery-1
		err := w.one(ctx, cl, n, abort)
		w.mu.Lock()
		switch {
		case err == nil && abort:
			w.aborted[n] = true
		case err == nil:
			w.committed[n] = true
		default:
			w.unknown++
		}
		w.mu.Unlock()
		if err != nil {
			// Start over under the same transactional id: InitProducerID
			// fences the old producer and ends its open transaction.
			cl.Close()
			for ctx.Err() == nil {
				if cl, err = w.client(); err == nil {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			w.mu.Lock()
			w.remade++
			w.mu.Unlock()
		}
	}
}

// one runs transaction n and ends it, committing unless abort.
func (w *txnWorkload) one(ctx context.Context, cl *kgo.Client, n int, abort bool) error {
	tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := cl.BeginTransaction(); err != nil {
		return err
	}
	prefix := "t"
	if abort {
		prefix = "a"
	}
	var errs []error
	for i := range txnRecords {
		r := &kgo.Record{Partition: int32(i % 3), Value: fmt.Appendf(nil, "%s%d-%d", prefix, n, i)}
		if err := cl.ProduceSync(tctx, r).FirstErr(); err != nil {
			errs = append(errs, err)
			break
		}
	}
	end := kgo.TryCommit
	if abort || len(errs) > 0 {
		end = kgo.TryAbort
	}
	if err := cl.EndTransaction(tctx, end); err != nil {
		return err
	}
	if len(errs) > 0 {
		return errs[0] // aborted: nothing of it is visible, counted unknown all the same
	}
	return nil
}

// check reads the topic read_committed and holds it to the promises of
// transactions: no transaction torn (all its records or none), none aborted
// visible, every acknowledged commit there whole.
func (w *txnWorkload) check(t *testing.T, ctx context.Context, seeds []string) {
	t.Helper()
	adm := kadm.NewClient(newClient(t, seeds))
	// Every transaction ended (one a failed producer left open is ended
	// by its successor, or by the coordinator past its timeout): the last
	// stable offsets reach the ends.
	testutil.EventuallyEvery(t, 45*time.Second, 200*time.Millisecond, func() error {
		ends, err1 := adm.ListEndOffsets(ctx, txnTopic)
		stable, err2 := adm.ListCommittedOffsets(ctx, txnTopic)
		same := err1 == nil && err2 == nil
		ends.Each(func(o kadm.ListedOffset) {
			s, ok := stable.Lookup(txnTopic, o.Partition)
			same = same && ok && s.Offset == o.Offset
		})
		if !same {
			return fmt.Errorf("transactions still open after the producer stopped: ends %v, stable %v (%v, %v)", ends, stable, err1, err2)
		}
		return nil
	})
	rd := newClient(t, seeds, kgo.ConsumeTopics(txnTopic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	seen := map[int]map[int]bool{}
	// Read until three polls in a row bring nothing: the producer has
	// stopped, so what is committed is all there is.
	for empty, deadline := 0, time.Now().Add(60*time.Second); empty < 3; {
		if time.Now().After(deadline) {
			t.Fatal("reading the transactions took over 60 s")
		}
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		fs := rd.PollFetches(pctx)
		cancel()
		if fs.NumRecords() == 0 {
			empty++
			continue
		}
		empty = 0
		fs.EachRecord(func(r *kgo.Record) {
			v := string(r.Value)
			if strings.HasPrefix(v, "a") {
				t.Errorf("a record of an aborted transaction is read committed: %s at %d/%d", v, r.Partition, r.Offset)
				return
			}
			num, idx, _ := strings.Cut(strings.TrimPrefix(v, "t"), "-")
			n, _ := strconv.Atoi(num)
			i, _ := strconv.Atoi(idx)
			if seen[n] == nil {
				seen[n] = map[int]bool{}
			}
			seen[n][i] = true
		})
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	torn := 0
	for n, idx := range seen {
		if len(idx) != txnRecords {
			torn++
			if torn <= 5 {
				t.Errorf("transaction %d is torn: %d of its %d records read committed", n, len(idx), txnRecords)
			}
		}
	}
	missing := 0
	for n := range w.committed {
		if len(seen[n]) != txnRecords {
			missing++
			if missing <= 5 {
				t.Errorf("transaction %d was committed, %d of its %d records read", n, len(seen[n]), txnRecords)
			}
		}
	}
	t.Logf("transactions: %d committed, %d aborted on purpose, %d ended by an error (%d producers made again); %d read committed whole, %d torn, %d committed ones missing",
		len(w.committed), len(w.aborted), w.unknown, w.remade, len(seen)-torn, torn, missing)
}
