package server_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/config"
	"github.com/strandlog/strand/internal/model"
	"github.com/strandlog/strand/internal/testutil"
	"github.com/strandlog/strand/internal/txn"
)

// Transactions over the wire, request by request, against an in-process
// broker: both of Kafka's transaction protocols (the older flow with
// AddPartitionsToTxn, and KIP-890's with EndTxn v5 and partitions added by
// Produce v12), read_committed fetches and ListOffsets, transactional
// offset commits, fencing, timeouts and operator APIs.

// txnBatch is a transactional batch of values from producer pid.
func txnBatch(pid int64, epoch int16, seq int32, values ...string) []byte {
	b := makeBatch(values...)
	binary.BigEndian.PutUint16(b[21:], 0x10) // transactional
	binary.BigEndian.PutUint64(b[43:], uint64(pid))
	binary.BigEndian.PutUint16(b[51:], uint16(epoch))
	binary.BigEndian.PutUint32(b[53:], uint32(seq))
	fixCRC(b)
	return b
}

func txnBroker(t *testing.T, edit func(*config.Broker)) (*testutil.Broker, *rawConn) {
	t.Helper()
	b := testutil.StartBroker(t, func(c *config.Broker) {
		c.DefaultPartitions = 2
		c.TransactionStatePartitions = 3
		c.OffsetsTopicPartitions = 3
		if edit != nil {
			edit(c)
		}
	})
	return b, dialRaw(t, b.Addr)
}

func initTxnProducer(t *testing.T, c *rawConn, v int16, id string, timeout int32, pid int64, epoch int16) *kmsg.InitProducerIDResponse {
	t.Helper()
	req := kmsg.NewPtrInitProducerIDRequest()
	req.SetVersion(v)
	req.TransactionalID = kmsg.StringPtr(id)
	req.TransactionTimeoutMillis = timeout
	req.ProducerID, req.ProducerEpoch = pid, epoch
	return c.do(req).(*kmsg.InitProducerIDResponse)
}

// mustInit retries InitProducerId through CONCURRENT_TRANSACTIONS, as
// clients do, and fails on any other error.
func mustInit(t *testing.T, c *rawConn, v int16, id string, timeout int32) (int64, int16) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp := initTxnProducer(t, c, v, id, timeout, -1, -1)
		switch {
		case resp.ErrorCode == 0:
			return resp.ProducerID, resp.ProducerEpoch
		case (resp.ErrorCode == kerr.ConcurrentTransactions.Code || resp.ErrorCode == kerr.CoordinatorLoadInProgress.Code ||
			resp.ErrorCode == kerr.NotCoordinator.Code) && time.Now().Before(deadline):
			// Retriable, as clients retry them: a coordinator in a cluster
			// loads its partition once the metadata naming it applies.
			time.Sleep(20 * time.Millisecond)
		default:
			t.Fatalf("InitProducerId %s: %v", id, kerr.ErrorForCode(resp.ErrorCode))
		}
	}
}

func txnProduce(c *rawConn, v int16, id *string, topic string, partition int32, batch []byte) kmsg.ProduceResponseTopicPartition {
	req := produceRequest(v, -1, topic, partition, batch)
	req.TransactionID = id
	return c.do(req).(*kmsg.ProduceResponse).Topics[0].Partitions[0]
}

func addPartitions(c *rawConn, v int16, id string, pid int64, epoch int16, topic string, partitions ...int32) []int16 {
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.SetVersion(v)
	req.TransactionalID, req.ProducerID, req.ProducerEpoch = id, pid, epoch
	rt := kmsg.NewAddPartitionsToTxnRequestTopic()
	rt.Topic, rt.Partitions = topic, partitions
	req.Topics = append(req.Topics, rt)
	resp := c.do(req).(*kmsg.AddPartitionsToTxnResponse)
	var codes []int16
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			codes = append(codes, p.ErrorCode)
		}
	}
	return codes
}

func endTxn(c *rawConn, v int16, id string, pid int64, epoch int16, commit bool) *kmsg.EndTxnResponse {
	req := kmsg.NewPtrEndTxnRequest()
	req.SetVersion(v)
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = id, pid, epoch, commit
	return c.do(req).(*kmsg.EndTxnResponse)
}

// readCommitted fetches one partition from offset with the isolation level
// given and returns the partition's answer.
func isolatedFetch(t *testing.T, c *rawConn, topic string, partition int32, offset int64, committed bool) kmsg.FetchResponseTopicPartition {
	t.Helper()
	req := fetchRequest(11, 0, 1, 1<<20, fetchPart{topic: topic, partition: partition, offset: offset})
	if committed {
		req.IsolationLevel = 1
	}
	resp := c.do(req).(*kmsg.FetchResponse)
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		t.Fatalf("fetch %s[%d] at %d: %v", topic, partition, offset, kerr.ErrorForCode(p.ErrorCode))
	}
	return p
}

// dataValues are the values of the data records in a fetched partition
// that a consumer keeps: with read_committed, records of the aborted
// transactions the answer lists are dropped, as clients do (a producer's
// records are skipped from its aborted transaction's first offset until its
// abort marker).
func dataValues(t *testing.T, p kmsg.FetchResponseTopicPartition) []string {
	t.Helper()
	batches, _ := parseBatches(t, p.RecordBatches)
	aborted := slices.Clone(p.AbortedTransactions)
	skipping := map[int64]bool{}
	var out []string
	for _, b := range batches {
		for len(aborted) > 0 && aborted[0].FirstOffset <= b.FirstOffset+int64(b.LastOffsetDelta) {
			skipping[aborted[0].ProducerID] = true
			aborted = aborted[1:]
		}
		if b.Attributes&0x20 != 0 {
			delete(skipping, b.ProducerID) // a marker ends the producer's transaction
			continue
		}
		if b.Attributes&0x10 != 0 && skipping[b.ProducerID] {
			continue
		}
		_, recs := parseBatches(t, rebatch(b))
		for _, r := range recs {
			out = append(out, r.value)
		}
	}
	return out
}

// rebatch re-encodes one parsed batch so its records can be read alone.
func rebatch(b kmsg.RecordBatch) []byte { return b.AppendTo(nil) }

func listEnd(t *testing.T, c *rawConn, topic string, partition int32, committed bool) int64 {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.SetVersion(9)
	req.ReplicaID = -1
	if committed {
		req.IsolationLevel = 1
	}
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp = partition, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	p := c.do(req).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		t.Fatalf("list offsets: %v", kerr.ErrorForCode(p.ErrorCode))
	}
	return p.Offset
}

func describeTxn(t *testing.T, c *rawConn, id string) kmsg.DescribeTransactionsResponseTransactionState {
	t.Helper()
	req := kmsg.NewPtrDescribeTransactionsRequest()
	req.TransactionalIDs = []string{id}
	resp := c.do(req).(*kmsg.DescribeTransactionsResponse)
	if len(resp.TransactionStates) != 1 {
		t.Fatalf("describe %s: %+v", id, resp)
	}
	return resp.TransactionStates[0]
}

func describeProducers(t *testing.T, c *rawConn, topic string, partition int32) []kmsg.DescribeProducersResponseTopicPartitionActiveProducer {
	t.Helper()
	req := kmsg.NewPtrDescribeProducersRequest()
	rt := kmsg.NewDescribeProducersRequestTopic()
	rt.Topic, rt.Partitions = topic, []int32{partition}
	req.Topics = append(req.Topics, rt)
	p := c.do(req).(*kmsg.DescribeProducersResponse).Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		t.Fatalf("describe producers: %v", kerr.ErrorForCode(p.ErrorCode))
	}
	return p.ActiveProducers
}

func code(c int16) string {
	if c == 0 {
		return "NONE"
	}
	return kerr.ErrorForCode(c).Error()
}

func expectCode(t *testing.T, what string, got int16, want *kerr.Error) {
	t.Helper()
	w := int16(0)
	if want != nil {
		w = want.Code
	}
	if got != w {
		t.Fatalf("%s: %s, want %s", what, code(got), code(w))
	}
}

// TestTxnProtocolV2 runs KIP-890's flow: Produce v12 adds partitions, EndTxn
// v5 bumps the epoch, markers fence the old epoch, read_committed stops at
// the open transaction and drops aborted records.
func TestTxnProtocolV2(t *testing.T) {
	_, c := txnBroker(t, nil)
	ensureTopic(t, c.nc.RemoteAddr().String(), "tx2")
	id := "v2-producer"
	pid, epoch := mustInit(t, c, 5, id, 60000)
	if epoch != 0 {
		t.Fatalf("new transactional id got epoch %d", epoch)
	}

	p := txnProduce(c, 12, &id, "tx2", 0, txnBatch(pid, epoch, 0, "a1", "a2"))
	expectCode(t, "produce v12 in a new transaction", p.ErrorCode, nil)
	if p.BaseOffset != 0 {
		t.Fatalf("base offset %d", p.BaseOffset)
	}
	if got := listEnd(t, c, "tx2", 0, true); got != 0 {
		t.Fatalf("read_committed end offset with an open transaction at 0: %d", got)
	}
	if got := listEnd(t, c, "tx2", 0, false); got != 2 {
		t.Fatalf("read_uncommitted end offset: %d, want 2", got)
	}
	f := isolatedFetch(t, c, "tx2", 0, 0, true)
	if f.LastStableOffset != 0 || f.HighWatermark != 2 || len(dataValues(t, f)) != 0 {
		t.Fatalf("read_committed fetch in an open transaction: lso %d hw %d values %v", f.LastStableOffset, f.HighWatermark, dataValues(t, f))
	}
	if got := dataValues(t, isolatedFetch(t, c, "tx2", 0, 0, false)); fmt.Sprint(got) != "[a1 a2]" {
		t.Fatalf("read_uncommitted sees %v", got)
	}
	d := describeTxn(t, c, id)
	if d.ErrorCode != 0 || d.State != "Ongoing" || d.ProducerID != pid || len(d.Topics) != 1 || fmt.Sprint(d.Topics[0].Partitions) != "[0]" {
		t.Fatalf("describe ongoing: %+v", d)
	}
	prods := describeProducers(t, c, "tx2", 0)
	if len(prods) != 1 || prods[0].ProducerID != pid || prods[0].CurrentTxnStartOffset != 0 {
		t.Fatalf("producers: %+v", prods)
	}

	e := endTxn(c, 5, id, pid, epoch, true)
	expectCode(t, "EndTxn v5 commit", e.ErrorCode, nil)
	if e.ProducerID != pid || e.ProducerEpoch != epoch+1 {
		t.Fatalf("EndTxn v5 answered %d/%d, want %d/%d", e.ProducerID, e.ProducerEpoch, pid, epoch+1)
	}
	f = isolatedFetch(t, c, "tx2", 0, 0, true)
	if got := dataValues(t, f); fmt.Sprint(got) != "[a1 a2]" || f.LastStableOffset != 3 || f.HighWatermark != 3 {
		t.Fatalf("after commit: values %v lso %d hw %d (the marker is offset 2)", got, f.LastStableOffset, f.HighWatermark)
	}
	if d := describeTxn(t, c, id); d.State != "CompleteCommit" || d.ProducerEpoch != epoch+1 || len(d.Topics) != 0 {
		t.Fatalf("describe after commit: %+v", d)
	}
	if prods := describeProducers(t, c, "tx2", 0); prods[0].CurrentTxnStartOffset != -1 || prods[0].ProducerEpoch != int32(epoch+1) {
		t.Fatalf("producers after commit: %+v", prods)
	}

	// The marker carried the bumped epoch: the old one is fenced.
	p = txnProduce(c, 12, &id, "tx2", 0, txnBatch(pid, epoch, 2, "zombie"))
	expectCode(t, "produce with the epoch before EndTxn v5", p.ErrorCode, kerr.InvalidProducerEpoch)

	// A second transaction, aborted: its records stay in the log and are
	// listed as aborted for read_committed.
	epoch++
	p = txnProduce(c, 12, &id, "tx2", 0, txnBatch(pid, epoch, 0, "b1"))
	expectCode(t, "produce in the second transaction", p.ErrorCode, nil)
	p = txnProduce(c, 12, &id, "tx2", 1, txnBatch(pid, epoch, 0, "b2"))
	expectCode(t, "produce to a second partition", p.ErrorCode, nil)
	e = endTxn(c, 5, id, pid, epoch, false)
	expectCode(t, "EndTxn v5 abort", e.ErrorCode, nil)
	if e.ProducerEpoch != epoch+1 {
		t.Fatalf("abort answered epoch %d, want %d", e.ProducerEpoch, epoch+1)
	}
	f = isolatedFetch(t, c, "tx2", 0, 3, true)
	if f.LastStableOffset != 5 || len(f.AbortedTransactions) != 1 || f.AbortedTransactions[0].ProducerID != pid || f.AbortedTransactions[0].FirstOffset != 3 {
		t.Fatalf("read_committed after abort: lso %d aborted %+v", f.LastStableOffset, f.AbortedTransactions)
	}
	if f := isolatedFetch(t, c, "tx2", 0, 3, false); f.AbortedTransactions != nil && len(f.AbortedTransactions) != 0 {
		t.Fatalf("read_uncommitted got aborted transactions %+v", f.AbortedTransactions)
	}
	// A retry of the abort with the epoch it was sent with succeeds.
	e = endTxn(c, 5, id, pid, epoch, false)
	expectCode(t, "retried EndTxn v5 abort", e.ErrorCode, nil)
	if e.ProducerEpoch != epoch+1 {
		t.Fatalf("retried abort answered epoch %d, want %d", e.ProducerEpoch, epoch+1)
	}
	// Aborting with nothing in the transaction is allowed in v5 and bumps
	// the epoch again.
	e = endTxn(c, 5, id, pid, epoch+1, false)
	expectCode(t, "EndTxn v5 abort of an empty transaction", e.ErrorCode, nil)
	if e.ProducerEpoch != epoch+2 {
		t.Fatalf("empty abort answered epoch %d, want %d", e.ProducerEpoch, epoch+2)
	}
}

// TestTxnProtocolV1 runs the older flow: partitions added explicitly and
// verified by Produce, the epoch kept across transactions, and
// InitProducerId fencing the previous instance.
func TestTxnProtocolV1(t *testing.T) {
	b, c := txnBroker(t, nil)
	ensureTopic(t, b.Addr, "tx1")
	id := "v1-producer"
	pid, epoch := mustInit(t, c, 4, id, 60000)

	p := txnProduce(c, 11, &id, "tx1", 0, txnBatch(pid, epoch, 0, "x"))
	expectCode(t, "produce v11 to a partition not in the transaction", p.ErrorCode, kerr.InvalidTxnState)
	codes := addPartitions(c, 3, id, pid, epoch, "no-such-topic", 0)
	if len(codes) != 1 || codes[0] != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("adding an unknown partition: %v", codes)
	}
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.SetVersion(3)
	req.TransactionalID, req.ProducerID, req.ProducerEpoch = id, pid, epoch
	for _, topic := range []string{"tx1", "missing"} {
		rt := kmsg.NewAddPartitionsToTxnRequestTopic()
		rt.Topic, rt.Partitions = topic, []int32{0}
		req.Topics = append(req.Topics, rt)
	}
	resp := c.do(req).(*kmsg.AddPartitionsToTxnResponse)
	if resp.Topics[0].Partitions[0].ErrorCode != kerr.OperationNotAttempted.Code || resp.Topics[1].Partitions[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("mixed add: %+v", resp.Topics)
	}

	codes = addPartitions(c, 3, id, pid, epoch, "tx1", 0, 1)
	if fmt.Sprint(codes) != "[0 0]" {
		t.Fatalf("add partitions: %v", codes)
	}
	expectCode(t, "produce v11 after AddPartitionsToTxn", txnProduce(c, 11, &id, "tx1", 0, txnBatch(pid, epoch, 0, "c1")).ErrorCode, nil)
	expectCode(t, "EndTxn v4 commit", endTxn(c, 4, id, pid, epoch, true).ErrorCode, nil)
	expectCode(t, "retried EndTxn v4 commit", endTxn(c, 4, id, pid, epoch, true).ErrorCode, nil)
	expectCode(t, "EndTxn v4 abort after commit", endTxn(c, 4, id, pid, epoch, false).ErrorCode, kerr.InvalidTxnState)
	if d := describeTxn(t, c, id); d.ProducerEpoch != epoch {
		t.Fatalf("the older flow kept epoch %d, now %d", epoch, d.ProducerEpoch)
	}

	// The next transaction continues the sequence with the same epoch.
	addPartitions(c, 3, id, pid, epoch, "tx1", 0)
	expectCode(t, "produce continuing the sequence", txnProduce(c, 11, &id, "tx1", 0, txnBatch(pid, epoch, 1, "c2")).ErrorCode, nil)
	expectCode(t, "EndTxn v4 abort", endTxn(c, 4, id, pid, epoch, false).ErrorCode, nil)

	// A new instance fences the old one.
	pid2, epoch2 := mustInit(t, c, 4, id, 60000)
	if pid2 != pid || epoch2 != epoch+1 {
		t.Fatalf("re-init gave %d/%d, want %d/%d", pid2, epoch2, pid, epoch+1)
	}
	if codes := addPartitions(c, 3, id, pid, epoch, "tx1", 0); codes[0] != kerr.ProducerFenced.Code {
		t.Fatalf("old epoch AddPartitionsToTxn v3: %s, want PRODUCER_FENCED", code(codes[0]))
	}
	if codes := addPartitions(c, 1, id, pid, epoch, "tx1", 0); codes[0] != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("old epoch AddPartitionsToTxn v1: %s, want INVALID_PRODUCER_EPOCH", code(codes[0]))
	}
	if codes := addPartitions(c, 3, id, pid+1000, epoch2, "tx1", 0); codes[0] != kerr.InvalidProducerIDMapping.Code {
		t.Fatalf("other producer id: %s, want INVALID_PRODUCER_ID_MAPPING", code(codes[0]))
	}
	// KIP-360: re-init naming a producer id and epoch that are not current.
	if r := initTxnProducer(t, c, 4, id, 60000, pid2, epoch2+5); r.ErrorCode != kerr.ProducerFenced.Code {
		t.Fatalf("re-init naming an epoch that is not current: %s, want PRODUCER_FENCED", code(r.ErrorCode))
	}
	if r := initTxnProducer(t, c, 4, id, 0, -1, -1); r.ErrorCode != kerr.InvalidTransactionTimeout.Code {
		t.Fatalf("timeout 0: %s", code(r.ErrorCode))
	}
	if r := initTxnProducer(t, c, 4, id, int32((16 * time.Minute).Milliseconds()), -1, -1); r.ErrorCode != kerr.InvalidTransactionTimeout.Code {
		t.Fatalf("timeout above transaction.max.timeout.ms: %s", code(r.ErrorCode))
	}

	got := dataValues(t, isolatedFetch(t, c, "tx1", 0, 0, true))
	if fmt.Sprint(got) != "[c1]" {
		t.Fatalf("read_committed sees %v, want [c1]", got)
	}
}

// TestTxnInitFencesOngoing: a new instance's InitProducerId aborts the
// transaction its predecessor left open.
func TestTxnInitFencesOngoing(t *testing.T) {
	b, c := txnBroker(t, nil)
	ensureTopic(t, b.Addr, "txf")
	id := "fenced"
	pid, epoch := mustInit(t, c, 5, id, 60000)
	expectCode(t, "produce", txnProduce(c, 12, &id, "txf", 0, txnBatch(pid, epoch, 0, "left-open")).ErrorCode, nil)

	pid2, epoch2 := mustInit(t, c, 5, id, 60000)
	if pid2 != pid || epoch2 <= epoch {
		t.Fatalf("re-init gave %d/%d after %d/%d", pid2, epoch2, pid, epoch)
	}
	f := isolatedFetch(t, c, "txf", 0, 0, true)
	if f.LastStableOffset != f.HighWatermark || len(f.AbortedTransactions) != 1 || len(dataValues(t, f)) != 0 ||
		len(dataValues(t, isolatedFetch(t, c, "txf", 0, 0, false))) != 1 {
		t.Fatalf("after fencing: lso %d hw %d aborted %+v", f.LastStableOffset, f.HighWatermark, f.AbortedTransactions)
	}
	expectCode(t, "old instance's produce", txnProduce(c, 12, &id, "txf", 0, txnBatch(pid, epoch, 1, "zombie")).ErrorCode, kerr.InvalidProducerEpoch)
	expectCode(t, "old instance's commit", endTxn(c, 5, id, pid, epoch, true).ErrorCode, kerr.ProducerFenced)
}

// TestTxnTimeoutAborts: an abandoned transaction is aborted after its
// timeout, with the epoch bumped so its producer is fenced.
func TestTxnTimeoutAborts(t *testing.T) {
	b, c := txnBroker(t, func(c *config.Broker) { c.TransactionAbortCheck = 50 * time.Millisecond })
	ensureTopic(t, b.Addr, "txt")
	id := "abandoned"
	pid, epoch := mustInit(t, c, 5, id, 300)
	expectCode(t, "produce", txnProduce(c, 12, &id, "txt", 1, txnBatch(pid, epoch, 0, "lost")).ErrorCode, nil)
	deadline := time.Now().Add(10 * time.Second)
	for describeTxn(t, c, id).State != "CompleteAbort" {
		if time.Now().After(deadline) {
			t.Fatalf("not aborted after its timeout: %+v", describeTxn(t, c, id))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if d := describeTxn(t, c, id); d.ProducerEpoch != epoch+1 {
		t.Fatalf("timeout abort left epoch %d", d.ProducerEpoch)
	}
	f := isolatedFetch(t, c, "txt", 1, 0, true)
	if f.LastStableOffset != 2 || len(dataValues(t, f)) != 0 || len(f.AbortedTransactions) != 1 {
		t.Fatalf("after timeout: lso %d aborted %+v", f.LastStableOffset, f.AbortedTransactions)
	}
	// Kafka 4's answers to the fenced producer's commit: the older flow is
	// fenced by the epoch; KIP-890's takes the old epoch for a retry, and a
	// commit of what was aborted is an invalid transition.
	expectCode(t, "EndTxn v4 commit after the timeout", endTxn(c, 4, id, pid, epoch, true).ErrorCode, kerr.ProducerFenced)
	expectCode(t, "EndTxn v5 commit after the timeout", endTxn(c, 5, id, pid, epoch, true).ErrorCode, kerr.InvalidTxnState)
	expectCode(t, "produce with the fenced epoch", txnProduce(c, 12, &id, "txt", 1, txnBatch(pid, epoch, 1, "late")).ErrorCode, kerr.InvalidProducerEpoch)
}

func txnOffsetCommit(c *rawConn, v int16, id, groupID string, pid int64, epoch int16, topic string, partition int32, offset int64) int16 {
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.SetVersion(v)
	req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = id, groupID, pid, epoch
	req.Generation = -1
	rt := kmsg.NewTxnOffsetCommitRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset, rp.LeaderEpoch = partition, offset, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return c.do(req).(*kmsg.TxnOffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
}

func fetchCommitted(t *testing.T, c *rawConn, groupID, topic string, partition int32, stable bool) (int64, int16) {
	t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.SetVersion(7)
	req.Group, req.RequireStable = groupID, stable
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic, rt.Partitions = topic, []int32{partition}
	req.Topics = append(req.Topics, rt)
	resp := c.do(req).(*kmsg.OffsetFetchResponse)
	if resp.ErrorCode != 0 {
		t.Fatalf("offset fetch: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	p := resp.Topics[0].Partitions[0]
	return p.Offset, p.ErrorCode
}

// TestTxnOffsetCommit: offsets committed in a transaction are invisible
// (UNSTABLE_OFFSET_COMMIT with RequireStable) until it commits, dropped
// when it aborts, and survive a restart in either state.
func TestTxnOffsetCommit(t *testing.T) {
	b, c := txnBroker(t, nil)
	ensureTopic(t, b.Addr, "txo")
	id, g := "offsets-producer", "txn-group"
	pid, epoch := mustInit(t, c, 4, id, 60000)

	// The older flow: AddOffsetsToTxn first.
	expectCode(t, "TxnOffsetCommit v3 without AddOffsetsToTxn", txnOffsetCommit(c, 3, id, g, pid, epoch, "txo", 0, 5), kerr.InvalidTxnState)
	add := kmsg.NewPtrAddOffsetsToTxnRequest()
	add.SetVersion(3)
	add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = id, pid, epoch, g
	expectCode(t, "AddOffsetsToTxn", c.do(add).(*kmsg.AddOffsetsToTxnResponse).ErrorCode, nil)
	expectCode(t, "TxnOffsetCommit v3", txnOffsetCommit(c, 3, id, g, pid, epoch, "txo", 0, 5), nil)
	expectCode(t, "TxnOffsetCommit to an unknown topic", txnOffsetCommit(c, 3, id, g, pid, epoch, "nope", 0, 5), kerr.UnknownTopicOrPartition)
	if off, ec := fetchCommitted(t, c, g, "txo", 0, true); ec != kerr.UnstableOffsetCommit.Code || off != -1 {
		t.Fatalf("require stable with a pending offset: %d %s", off, code(ec))
	}
	if off, ec := fetchCommitted(t, c, g, "txo", 0, false); ec != 0 || off != -1 {
		t.Fatalf("pending offset seen: %d %s", off, code(ec))
	}
	expectCode(t, "commit", endTxn(c, 4, id, pid, epoch, true).ErrorCode, nil)
	if off, ec := fetchCommitted(t, c, g, "txo", 0, true); ec != 0 || off != 5 {
		t.Fatalf("after commit: %d %s", off, code(ec))
	}

	// KIP-890's flow: TxnOffsetCommit v5 adds the group itself; aborted.
	pid, epoch = mustInit(t, c, 5, id, 60000)
	expectCode(t, "TxnOffsetCommit v5", txnOffsetCommit(c, 5, id, g, pid, epoch, "txo", 0, 9), nil)
	e := endTxn(c, 5, id, pid, epoch, false)
	expectCode(t, "abort", e.ErrorCode, nil)
	if off, ec := fetchCommitted(t, c, g, "txo", 0, true); ec != 0 || off != 5 {
		t.Fatalf("after abort: %d %s, want 5", off, code(ec))
	}

	// Left pending across a restart, then committed.
	epoch = e.ProducerEpoch
	expectCode(t, "TxnOffsetCommit v5 before restart", txnOffsetCommit(c, 5, id, g, pid, epoch, "txo", 0, 7), nil)
	b.Restart(t)
	c = dialRaw(t, b.Addr)
	if off, ec := fetchCommitted(t, c, g, "txo", 0, true); ec != kerr.UnstableOffsetCommit.Code {
		t.Fatalf("pending offset after restart: %d %s, want UNSTABLE_OFFSET_COMMIT", off, code(ec))
	}
	if d := describeTxn(t, c, id); d.State != "Ongoing" {
		t.Fatalf("transaction after restart: %+v", d)
	}
	expectCode(t, "commit after restart", endTxn(c, 5, id, pid, epoch, true).ErrorCode, nil)
	if off, ec := fetchCommitted(t, c, g, "txo", 0, true); ec != 0 || off != 7 {
		t.Fatalf("after commit across a restart: %d %s, want 7", off, code(ec))
	}
	b.Restart(t)
	c = dialRaw(t, b.Addr)
	if off, ec := fetchCommitted(t, c, g, "txo", 0, true); ec != 0 || off != 7 {
		t.Fatalf("committed offset after restart: %d %s, want 7", off, code(ec))
	}
}

// TestWriteTxnMarkersEndsHangingTransaction: an operator's WriteTxnMarkers
// (Admin.abortTransaction) closes a transaction at the partition, and
// ListTransactions/DescribeProducers show what operators look for.
func TestWriteTxnMarkersEndsHangingTransaction(t *testing.T) {
	b, c := txnBroker(t, nil)
	ensureTopic(t, b.Addr, "txh")
	id := "hanging"
	pid, epoch := mustInit(t, c, 5, id, 60000)
	expectCode(t, "produce", txnProduce(c, 12, &id, "txh", 0, txnBatch(pid, epoch, 0, "h1", "h2")).ErrorCode, nil)

	lt := kmsg.NewPtrListTransactionsRequest()
	lt.SetVersion(1)
	lt.StateFilters = []string{"Ongoing", "NoSuchState"}
	lt.DurationFilterMillis = -1
	lr := c.do(lt).(*kmsg.ListTransactionsResponse)
	if lr.ErrorCode != 0 || len(lr.TransactionStates) != 1 || lr.TransactionStates[0].TransactionalID != id ||
		fmt.Sprint(lr.UnknownStateFilters) != "[NoSuchState]" {
		t.Fatalf("list ongoing: %+v", lr)
	}
	lt.StateFilters = []string{"CompleteCommit"}
	if lr := c.do(lt).(*kmsg.ListTransactionsResponse); len(lr.TransactionStates) != 0 {
		t.Fatalf("list CompleteCommit: %+v", lr.TransactionStates)
	}

	w := kmsg.NewPtrWriteTxnMarkersRequest()
	w.SetVersion(1)
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.ProducerEpoch, m.Committed, m.CoordinatorEpoch = pid, epoch, false, 0
	mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
	mt.Topic, mt.Partitions = "txh", []int32{0, 7}
	m.Topics = append(m.Topics, mt)
	w.Markers = append(w.Markers, m)
	wr := c.do(w).(*kmsg.WriteTxnMarkersResponse)
	ps := wr.Markers[0].Topics[0].Partitions
	if ps[0].ErrorCode != 0 || ps[1].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("write markers: %+v", ps)
	}
	f := isolatedFetch(t, c, "txh", 0, 0, true)
	if f.LastStableOffset != 3 || len(f.AbortedTransactions) != 1 {
		t.Fatalf("after the operator's abort: lso %d aborted %+v", f.LastStableOffset, f.AbortedTransactions)
	}
	if prods := describeProducers(t, c, "txh", 0); len(prods) != 1 || prods[0].CurrentTxnStartOffset != -1 {
		t.Fatalf("producers after abort: %+v", prods)
	}
	// A coordinator epoch above the single node's is refused before it can
	// fence the coordinator's own markers.
	m.CoordinatorEpoch = 5
	w.Markers[0] = m
	if wr := c.do(w).(*kmsg.WriteTxnMarkersResponse); wr.Markers[0].Topics[0].Partitions[0].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("coordinator epoch 5: %+v", wr.Markers[0].Topics[0].Partitions)
	}
	// A marker of an older producer epoch is refused.
	pid2, epoch2 := mustInit(t, c, 5, id, 60000)
	expectCode(t, "produce with the new epoch", txnProduce(c, 12, &id, "txh", 0, txnBatch(pid2, epoch2, 0, "h3")).ErrorCode, nil)
	m.CoordinatorEpoch, m.ProducerEpoch = 0, epoch2-1
	w.Markers[0] = m
	if wr := c.do(w).(*kmsg.WriteTxnMarkersResponse); wr.Markers[0].Topics[0].Partitions[0].ErrorCode != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("stale marker: %+v", wr.Markers[0].Topics[0].Partitions)
	}
}

// TestTxnKgo runs franz-go's transactional producer and read_committed
// consumer in-process: committed records once, aborted ones never.
func TestTxnKgo(t *testing.T) {
	b, _ := txnBroker(t, nil)
	ensureTopic(t, b.Addr, "txk")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := newClient(t, b.Addr, kgo.TransactionalID("kgo-txn"), kgo.DefaultProduceTopic("txk"), kgo.TransactionTimeout(10*time.Second))
	var want []string
	for i := range 6 {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		var vals []string
		for j := range 5 {
			v := fmt.Sprintf("t%d-%d", i, j)
			vals = append(vals, v)
			if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte(v), Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		commit := i%3 != 1
		if commit {
			want = append(want, vals...)
		}
		if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatalf("ending transaction %d: %v", i, err)
		}
	}
	got := map[string]int{}
	rd := newClient(t, b.Addr, kgo.ConsumeTopics("txk"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	n := 0
	for n < len(want) {
		fs := rd.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read %d of %d committed records: %v", n, len(want), got)
		}
		fs.EachRecord(func(r *kgo.Record) {
			got[string(r.Value)]++
			n++
		})
	}
	// Anything still to come would be a record of an aborted transaction.
	short, stop := context.WithTimeout(ctx, 500*time.Millisecond)
	defer stop()
	rd.PollFetches(short).EachRecord(func(r *kgo.Record) { got[string(r.Value)]++ })
	if len(got) != len(want) {
		t.Fatalf("read_committed saw %d distinct values, want %d: %v", len(got), len(want), got)
	}
	for _, v := range want {
		if got[v] != 1 {
			t.Fatalf("value %s seen %d times", v, got[v])
		}
	}
}

// TestTxnClusterRequests drives the transaction APIs over the wire in a
// two-broker cluster, where the coordinator and the partitions' leaders
// differ: the coordinator takes AddPartitionsToTxn of partitions it does
// not lead; a leader verifies the older protocol's produce with the
// coordinator (AddPartitionsToTxn v5 VerifyOnly through the peer client)
// and answers its per-partition verdicts; the coordinator's markers reach
// the other broker's partitions; a broker that does not coordinate an id
// answers NOT_COORDINATOR and passes nothing on; WriteTxnMarkers for a
// partition led elsewhere is NOT_LEADER_OR_FOLLOWER, and one naming a
// coordinator epoch above every __transaction_state leader's is refused.
func TestTxnClusterRequests(t *testing.T) {
	// Slow: two brokers, and transactions whose markers cross between them.
	// It waits more than it works, so it runs beside the other slow tests.
	t.Parallel()
	cl := testutil.StartCluster(t, 2, 0, func(_ int, c *config.Broker) {
		c.DefaultPartitions = 4
		c.TransactionStatePartitions = 4
		c.OffsetsTopicPartitions = 2
	})
	c0, c1 := dialRaw(t, cl.Brokers[0].Addr), dialRaw(t, cl.Brokers[1].Addr)
	ensureTopic(t, cl.Brokers[0].Addr, "txc")
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.SetVersion(4)
	fc.CoordinatorType, fc.CoordinatorKey, fc.CoordinatorKeys = 1, "x", []string{"x"}
	if r := c0.do(fc).(*kmsg.FindCoordinatorResponse); len(r.Coordinators) != 1 || r.Coordinators[0].ErrorCode != 0 {
		t.Fatalf("FindCoordinator: %+v", r)
	}
	ledBy := map[int32][]int32{}
	deadline := time.Now().Add(10 * time.Second)
	for _, b := range cl.Brokers {
		for {
			data, ok1 := b.Server().Metadata().Topic("txc")
			_, ok2 := b.Server().Metadata().Topic(txn.StateTopic)
			if ok1 && ok2 {
				ledBy = map[int32][]int32{}
				for i, st := range data.States {
					ledBy[st.Leader] = append(ledBy[st.Leader], int32(i))
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("topics not known to broker %d: %v %v", b.Config.NodeID, ok1, ok2)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	if len(ledBy[0]) != 2 || len(ledBy[1]) != 2 {
		t.Fatalf("txc's leaders: %v", ledBy)
	}
	state, _ := cl.Brokers[0].Server().Metadata().Topic(txn.StateTopic)
	id := ""
	for i := 0; id == ""; i++ {
		if k := fmt.Sprintf("cluster-txn-%d", i); state.States[model.CoordinatorPartition(k, state.Partitions)].Leader == 1 {
			id = k
		}
	}

	// Broker 0 does not coordinate the id.
	if resp := initTxnProducer(t, c0, 4, id, 60000, -1, -1); resp.ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("InitProducerId at broker 0: %s", code(resp.ErrorCode))
	}
	pid, epoch := mustInit(t, c1, 4, id, 60000)
	here, there := ledBy[0][0], ledBy[0][1]
	if codes := addPartitions(c1, 3, id, pid, epoch, "txc", here, ledBy[1][0]); codes[0] != 0 || codes[1] != 0 {
		t.Fatalf("AddPartitionsToTxn at the coordinator: %s %s", code(codes[0]), code(codes[1]))
	}
	// Verified with the coordinator, broker 1.
	expectCode(t, "produce v11 of an added partition", txnProduce(c0, 11, &id, "txc", here, txnBatch(pid, epoch, 0, "a")).ErrorCode, nil)
	expectCode(t, "produce v11 of a partition not added", txnProduce(c0, 11, &id, "txc", there, txnBatch(pid, epoch, 0, "b")).ErrorCode,
		kerr.InvalidTxnState)
	expectCode(t, "produce v11 with an old epoch", txnProduce(c0, 11, &id, "txc", here, txnBatch(pid, epoch-1, 1, "c")).ErrorCode,
		kerr.InvalidProducerEpoch)
	// Broker 0 answers a verification of an id it does not coordinate
	// itself: NOT_COORDINATOR, not passed on.
	v := kmsg.NewPtrAddPartitionsToTxnRequest()
	v.SetVersion(5)
	vt := kmsg.NewAddPartitionsToTxnRequestTransaction()
	vt.TransactionalID, vt.ProducerID, vt.ProducerEpoch, vt.VerifyOnly = id, pid, epoch, true
	vtt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
	vtt.Topic, vtt.Partitions = "txc", []int32{here}
	vt.Topics = append(vt.Topics, vtt)
	v.Transactions = append(v.Transactions, vt)
	if resp := c0.do(v).(*kmsg.AddPartitionsToTxnResponse); resp.Transactions[0].Topics[0].Partitions[0].ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("verification at broker 0: %+v", resp.Transactions)
	}
	if resp := c1.do(v).(*kmsg.AddPartitionsToTxnResponse); resp.Transactions[0].Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("verification at broker 1: %+v", resp.Transactions)
	}
	if lso, hw := listEnd(t, c0, "txc", here, true), listEnd(t, c0, "txc", here, false); lso != 0 || hw != 1 {
		t.Fatalf("open transaction: lso %d hw %d", lso, hw)
	}
	// The commit's marker goes to broker 0 over the network.
	if resp := endTxn(c1, 4, id, pid, epoch, true); resp.ErrorCode != 0 {
		t.Fatalf("EndTxn: %s", code(resp.ErrorCode))
	}
	if lso := listEnd(t, c0, "txc", here, true); lso != 2 {
		t.Fatalf("after the commit: lso %d, want 2 (the record and its marker)", lso)
	}
	if got := dataValues(t, isolatedFetch(t, c0, "txc", here, 0, true)); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("read_committed: %v", got)
	}

	w := kmsg.NewPtrWriteTxnMarkersRequest()
	w.SetVersion(1)
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.ProducerEpoch, m.Committed = pid, epoch, false
	mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
	mt.Topic, mt.Partitions = "txc", []int32{ledBy[1][0]}
	m.Topics = append(m.Topics, mt)
	w.Markers = append(w.Markers, m)
	if p := c0.do(w).(*kmsg.WriteTxnMarkersResponse).Markers[0].Topics[0].Partitions[0]; p.ErrorCode != kerr.NotLeaderForPartition.Code {
		t.Fatalf("marker for a partition led elsewhere: %s", code(p.ErrorCode))
	}
	top := int32(0)
	for _, st := range state.States {
		top = max(top, st.LeaderEpoch)
	}
	w.Markers[0].CoordinatorEpoch = top + 1
	w.Markers[0].Topics[0].Partitions = []int32{here}
	if p := c0.do(w).(*kmsg.WriteTxnMarkersResponse).Markers[0].Topics[0].Partitions[0]; p.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("marker of coordinator epoch %d: %s", top+1, code(p.ErrorCode))
	}
}
