package main

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandlog/strand/internal/recordfmt"
)

// produceOptions are strand produce's flags.
type produceOptions struct {
	brokers, keySeparator, delimiter, compression, acks, transactionalID string
	headers                                                              []string
	partition                                                            int32
	maxRecordBytes                                                       int
	timeout                                                              time.Duration
}

func produceCommand() *cobra.Command {
	var o produceOptions
	cmd := &cobra.Command{Use: "produce TOPIC", Short: "Write records read from standard input, one per line", Args: cobra.ExactArgs(1),
		Long: `Write records read from standard input: each line is a record's value, or with
--key-separator its key, the separator and its value (a line without the
separator has no key). --delimiter ends records at something else than a
newline. The separator and delimiter may use the escapes \n \t \r \0 \\.

With --transactional-id every record is written in one transaction, committed
at the end of the input and aborted if a record fails. The exit status is
non-zero when any record was not written.`,
		Example: `  printf 'a:1\nb:2\n' | strand produce orders --key-separator :
  strand produce orders --partition 0 --header source=cli --compression zstd < records.txt
  strand produce orders --transactional-id loader-1 < batch.txt`,
		RunE: func(cmd *cobra.Command, args []string) error { return produceStdin(cmd, args[0], o) }}
	f := cmd.Flags()
	brokersFlag(f, &o.brokers)
	f.StringVarP(&o.keySeparator, "key-separator", "K", "", "what separates a record's key from its value (none: no keys)")
	f.StringVarP(&o.delimiter, "delimiter", "D", `\n`, "what ends a record")
	f.StringArrayVarP(&o.headers, "header", "H", nil, "a header of every record, key=value (repeatable)")
	f.Int32VarP(&o.partition, "partition", "p", -1, "the partition to write to (-1: by key, as Kafka's clients do)")
	f.StringVarP(&o.compression, "compression", "z", "none", "none, gzip, snappy, lz4 or zstd")
	f.StringVar(&o.acks, "acks", "all", "all, 1 or 0 (all writes idempotently)")
	f.StringVar(&o.transactionalID, "transactional-id", "", "write every record in one transaction with this id")
	f.IntVar(&o.maxRecordBytes, "max-record-bytes", 1<<20, "the longest record read from the input")
	f.DurationVar(&o.timeout, "timeout", 30*time.Second, "how long a record may take to be written")
	return cmd
}

func produceStdin(cmd *cobra.Command, topic string, o produceOptions) error {
	opts, err := o.clientOpts(topic)
	if err != nil {
		return err
	}
	var headers []kgo.RecordHeader
	for _, h := range o.headers {
		k, v, ok := strings.Cut(h, "=")
		if !ok || k == "" {
			return fmt.Errorf("--header %q: key=value", h)
		}
		headers = append(headers, kgo.RecordHeader{Key: k, Value: []byte(v)})
	}
	delim, err := recordfmt.Unescape(o.delimiter)
	if err != nil {
		return fmt.Errorf("--delimiter: %w", err)
	}
	sep, err := recordfmt.Unescape(o.keySeparator)
	if err != nil {
		return fmt.Errorf("--key-separator: %w", err)
	}
	in, err := recordfmt.NewInput(cmd.InOrStdin(), delim, sep, o.maxRecordBytes)
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	cl, err := connect(ctx, o.brokers, opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	if o.transactionalID != "" {
		if err := cl.BeginTransaction(); err != nil {
			return err
		}
	}
	w := &written{partitions: map[int32]int{}}
	w.progress = startProgress(cmd.ErrOrStderr(), "records written")
	defer w.progress.end()
	for {
		key, value, ok := in.Next()
		if !ok {
			break
		}
		r := &kgo.Record{Key: key, Value: value, Headers: headers, Partition: o.partition}
		w.add()
		cl.Produce(ctx, r, w.done)
	}
	inErr := in.Err()
	if err := cl.Flush(ctx); err != nil {
		return err
	}
	failed, firstErr := w.failed()
	if o.transactionalID != "" {
		commit := kgo.TryCommit
		if failed > 0 || inErr != nil {
			commit = kgo.TryAbort
		}
		if err := cl.EndTransaction(ctx, commit); err != nil {
			return fmt.Errorf("ending the transaction: %w", err)
		}
		if commit == kgo.TryAbort {
			w.aborted()
		}
	}
	w.progress.end()
	fmt.Fprintln(cmd.ErrOrStderr(), w.summary(topic))
	switch {
	case inErr != nil:
		return fmt.Errorf("reading the input: %w", inErr)
	case failed > 0 && errors.Is(firstErr, kerr.UnknownTopicOrPartition):
		return fmt.Errorf("%d records not written: %w", failed, topicNotFound(ctx, kadm.NewClient(cl), topic, firstErr))
	case failed > 0:
		return fmt.Errorf("%d records not written to %s; the first: %w", failed, topic, firstErr)
	}
	return nil
}

// clientOpts are the producer's client options from the flags.
func (o produceOptions) clientOpts(topic string) ([]kgo.Opt, error) {
	// A topic that does not exist is created where the broker allows it
	// (auto.create.topics.enable), as Kafka's producers do.
	opts := []kgo.Opt{kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation(),
		kgo.RecordDeliveryTimeout(o.timeout), kgo.ProducerBatchMaxBytes(int32(max(1<<20, o.maxRecordBytes+1024)))}
	codecs := map[string]kgo.CompressionCodec{"none": kgo.NoCompression(), "gzip": kgo.GzipCompression(),
		"snappy": kgo.SnappyCompression(), "lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression()}
	codec, ok := codecs[o.compression]
	if !ok {
		return nil, fmt.Errorf("--compression %q: one of %s", o.compression, strings.Join(slices.Sorted(maps.Keys(codecs)), ", "))
	}
	opts = append(opts, kgo.ProducerBatchCompression(codec))
	switch o.acks {
	case "all", "-1":
	case "1", "0":
		if o.transactionalID != "" {
			return nil, errors.New("--transactional-id needs --acks all")
		}
		acks := kgo.LeaderAck()
		if o.acks == "0" {
			acks = kgo.NoAck()
		}
		// One request in flight keeps the input's order without idempotence.
		opts = append(opts, kgo.RequiredAcks(acks), kgo.DisableIdempotentWrite(), kgo.MaxProduceRequestsInflightPerBroker(1))
	default:
		return nil, fmt.Errorf("--acks %q: all, 1 or 0", o.acks)
	}
	if o.partition >= 0 {
		opts = append(opts, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	}
	if o.transactionalID != "" {
		opts = append(opts, kgo.TransactionalID(o.transactionalID))
	}
	return opts, nil
}

// written counts a produce's records as they are answered.
type written struct {
	mu                sync.Mutex
	sent, ok, errs    int
	first             error
	partitions        map[int32]int
	transactionFailed bool
	progress          *progress // on a terminal
}

func (w *written) add() {
	w.mu.Lock()
	w.sent++
	w.mu.Unlock()
}

func (w *written) done(r *kgo.Record, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		w.errs++
		if w.first == nil {
			w.first = err
		}
		return
	}
	w.ok++
	w.partitions[r.Partition]++
	w.progress.add(1)
}

func (w *written) failed() (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.errs, w.first
}

// aborted notes that the transaction was aborted: nothing is written.
func (w *written) aborted() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.transactionFailed = true
}

// summary is the line printed at the end.
func (w *written) summary(topic string) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.transactionFailed {
		return fmt.Sprintf("aborted the transaction of %d records to %s", w.sent, topic)
	}
	var ps []string
	for _, p := range slices.Sorted(maps.Keys(w.partitions)) {
		ps = append(ps, fmt.Sprintf("%d: %d", p, w.partitions[p]))
	}
	s := fmt.Sprintf("wrote %d records to %s", w.ok, topic)
	if len(ps) > 0 {
		s += " (partition " + strings.Join(ps, ", ") + ")"
	}
	return s
}
