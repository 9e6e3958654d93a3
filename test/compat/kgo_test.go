package compat

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// franz-go (kgo, kadm) against the real binary.

// TestKgoAdminTopics creates a topic with configs through kadm and reads it
// back through metadata and DescribeConfigs.
func TestKgoAdminTopics(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(client(t, b.Addr))
	retention := "86400000"
	resp, err := adm.CreateTopic(ctx, 4, 1, map[string]*string{"retention.ms": &retention}, "kgo-admin")
	if err != nil {
		t.Fatalf("CreateTopic: %v", err)
	}
	if resp.NumPartitions != 4 || resp.ReplicationFactor != 1 {
		t.Errorf("created with %d partitions, replication %d; want 4, 1", resp.NumPartitions, resp.ReplicationFactor)
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "kgo-admin"); !errors.Is(err, kerr.TopicAlreadyExists) {
		t.Errorf("creating it again: %v, want TOPIC_ALREADY_EXISTS", err)
	}
	details, err := adm.ListTopics(ctx, "kgo-admin")
	if err != nil {
		t.Fatal(err)
	}
	d := details["kgo-admin"]
	if d.Err != nil || len(d.Partitions) != 4 || d.ID != resp.ID {
		t.Errorf("listed: err %v, %d partitions, id %v (created id %v)", d.Err, len(d.Partitions), d.ID, resp.ID)
	}
	cfgs, err := adm.DescribeTopicConfigs(ctx, "kgo-admin")
	if err != nil {
		t.Fatal(err)
	}
	c, err := cfgs.On("kgo-admin", nil)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, kv := range c.Configs {
		if kv.Key == "retention.ms" {
			found = true
			if kv.MaybeValue() != retention {
				t.Errorf("retention.ms %q, want %q", kv.MaybeValue(), retention)
			}
		}
	}
	if !found {
		t.Error("retention.ms not described")
	}
}

// TestKgoKeysAndCodecs produces keyed records with every codec: the same
// key always lands on the same partition, everything comes back in order,
// and each batch is stored with the producer's codec.
func TestKgoKeysAndCodecs(t *testing.T) {
	t.Parallel()
	b := startBroker(t, "--default-partitions", "4")
	codecs := []struct {
		name  string
		codec kgo.CompressionCodec
		attr  uint8
	}{
		{"none", kgo.NoCompression(), 0},
		{"gzip", kgo.GzipCompression(), 1},
		{"snappy", kgo.SnappyCompression(), 2},
		{"lz4", kgo.Lz4Compression(), 3},
		{"zstd", kgo.ZstdCompression(), 4},
	}
	for _, c := range codecs {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			topic := "kgo-" + c.name
			createTopic(t, b.Addr, topic, 4, nil)
			cl := client(t, b.Addr, kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation(),
				kgo.ProducerBatchCompression(c.codec), kgo.ProducerLinger(5*time.Millisecond))
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			const n = 2000
			sent := make([]*kgo.Record, n)
			for i := range sent {
				// At least 100 zeros: franz-go sends a batch uncompressed
				// when compressing would not shrink it, and even a batch
				// of one record must shrink under every codec.
				sent[i] = &kgo.Record{Key: fmt.Appendf(nil, "key-%d", i%13),
					Value: fmt.Appendf(nil, "%s-value-%06d-%0*d", c.name, i, 100+i%200, 0)}
			}
			// The first alone (a batch of one record), the rest
			// asynchronously, so batches hold many records.
			if err := cl.ProduceSync(ctx, sent[0]).FirstErr(); err != nil {
				t.Fatal(err)
			}
			errs := make(chan error, n)
			for _, r := range sent[1:] {
				cl.Produce(ctx, r, func(_ *kgo.Record, err error) { errs <- err })
			}
			if err := cl.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			for range n - 1 {
				if err := <-errs; err != nil {
					t.Fatalf("produce: %v", err)
				}
			}
			keyPart := map[string]int32{}
			for _, r := range sent {
				if p, ok := keyPart[string(r.Key)]; ok && p != r.Partition {
					t.Fatalf("key %s acknowledged on partitions %d and %d", r.Key, p, r.Partition)
				}
				keyPart[string(r.Key)] = r.Partition
			}
			got := readAll(t, b.Addr, topic)
			if d := sameRecs(asRecs(got), asRecs(sent)); d != "" {
				t.Fatalf("read back: %s", d)
			}
			// Per partition, offsets follow the send order.
			last := map[int32]int64{}
			for _, r := range sent {
				if prev, ok := last[r.Partition]; ok && r.Offset != prev+1 {
					t.Fatalf("partition %d: offset %d after %d", r.Partition, r.Offset, prev)
				}
				last[r.Partition] = r.Offset
			}
			checkCodec(t, got, c.attr, true)
			multi := false
			for _, r := range got {
				if r.ProducerID < 0 {
					t.Fatalf("record %d/%d has no producer id (franz-go produces idempotently by default)", r.Partition, r.Offset)
				}
			}
			for p := range last {
				multi = multi || last[p] > 0
			}
			if !multi {
				t.Error("every partition got at most one record")
			}
		})
	}
}

// TestKgoListOffsetsByTime lists offsets by timestamp (ListOffsets with a
// time): across batches and inside one batch.
func TestKgoListOffsetsByTime(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	topic := "kgo-times"
	createTopic(t, b.Addr, topic, 1, nil)
	cl := client(t, b.Addr, kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation())
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	at := func(i int) time.Time { return base.Add(time.Duration(i) * time.Second) }
	// Offsets 0-9: ten batches of one record, one second apart.
	for i := range 10 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "v%d", i), Timestamp: at(i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	// Offsets 10-19: one batch, seconds 10..19.
	var batch []*kgo.Record
	for i := 10; i < 20; i++ {
		batch = append(batch, &kgo.Record{Value: fmt.Appendf(nil, "v%d", i), Timestamp: at(i)})
	}
	if err := cl.ProduceSync(ctx, batch...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if batch[0].Offset != 10 || batch[9].Offset != 19 {
		t.Fatalf("batch at offsets %d-%d, want 10-19", batch[0].Offset, batch[9].Offset)
	}
	for _, c := range []struct {
		ms   int64
		want int64
	}{
		{at(0).UnixMilli() - 5000, 0}, // before everything: the first record
		{at(0).UnixMilli(), 0},
		{at(3).UnixMilli(), 3},
		{at(3).UnixMilli() + 1, 4}, // between records: the next one
		{at(9).UnixMilli() + 500, 10},
		{at(14).UnixMilli(), 14}, // inside a batch: that record, not the batch's first
		{at(15).UnixMilli() - 1, 15},
		{at(19).UnixMilli(), 19},
		{at(19).UnixMilli() + 1, 20}, // after everything: kadm falls back to the end offset
	} {
		listed, err := adm.ListOffsetsAfterMilli(ctx, c.ms, topic)
		if err != nil {
			t.Fatal(err)
		}
		o, ok := listed.Lookup(topic, 0)
		if !ok || o.Err != nil || o.Offset != c.want {
			t.Errorf("offset after %s: %+v, want %d", time.UnixMilli(c.ms).Sub(base), o, c.want)
		}
	}
}

// TestKgoDeleteRecords moves the log start with DeleteRecords: reads start
// there, and earlier offsets are out of range.
func TestKgoDeleteRecords(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	topic := "kgo-delete"
	createTopic(t, b.Addr, topic, 2, nil)
	cl := client(t, b.Addr, kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation(),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var rs []*kgo.Record
	for i := range 100 {
		rs = append(rs, &kgo.Record{Value: fmt.Appendf(nil, "v%03d", i)})
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: topic, Partition: 0, At: 60})
	del, err := adm.DeleteRecords(ctx, os)
	if err != nil {
		t.Fatalf("DeleteRecords: %v", err)
	}
	if r, ok := del.Lookup(topic, 0); !ok || r.Err != nil || r.LowWatermark != 60 {
		t.Errorf("DeleteRecords answered %+v, want low watermark 60", r)
	}
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := starts.Lookup(topic, 0); o.Offset != 60 {
		t.Errorf("start offset %d after DeleteRecords, want 60", o.Offset)
	}
	got := readAll(t, b.Addr, topic)
	if len(got) != 40 || got[0].Offset != 60 || string(got[0].Value) != "v060" {
		t.Errorf("after DeleteRecords read %d records from offset %d, want 40 from 60", len(got), firstOffset(got))
	}
	// Beyond the end offset is OFFSET_OUT_OF_RANGE too.
	os = nil
	os.Add(kadm.Offset{Topic: topic, Partition: 0, At: 101})
	if del, err = adm.DeleteRecords(ctx, os); err == nil {
		if r, _ := del.Lookup(topic, 0); !errors.Is(r.Err, kerr.OffsetOutOfRange) {
			t.Errorf("deleting beyond the end: %v, want OFFSET_OUT_OF_RANGE", r.Err)
		}
	}
	// A fetch below the new start is OFFSET_OUT_OF_RANGE.
	resp, err := fetchRequest(t, ctx, adm, topic, 0, 10).RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("fetch answered %d topics, want 1 with 1 partition", len(resp.Topics))
	}
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != kerr.OffsetOutOfRange.Code {
		t.Errorf("fetch at 10 below start 60: error %v, want OFFSET_OUT_OF_RANGE", kerr.ErrorForCode(code))
	}
}

func firstOffset(rs []*kgo.Record) int64 {
	if len(rs) == 0 {
		return -1
	}
	return rs[0].Offset
}

// fetchRequest is a raw fetch of one partition at offset, naming the topic
// both ways (by name up to v12, by id from v13) so any version works.
func fetchRequest(t *testing.T, ctx context.Context, adm *kadm.Client, topic string, partition int32, offset int64) *kmsg.FetchRequest {
	t.Helper()
	details, err := adm.ListTopics(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxBytes = 1 << 20
	req.SessionEpoch = -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic, details[topic].ID
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = partition, offset, 1<<20
	rp.CurrentLeaderEpoch, rp.LogStartOffset = -1, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}
