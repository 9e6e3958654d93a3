package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandlog/strand/internal/inspect"
	"github.com/strandlog/strand/internal/recordfmt"
)

// consumeOptions are strand consume's flags.
type consumeOptions struct {
	brokers, group, shareGroup string
	from, format               string
	assignors                  []string
	partitions                 []int32
	num                        int
	exitAtEnd, readCommitted   bool
	timeout                    time.Duration
}

func consumeCommand() *cobra.Command {
	var o consumeOptions
	cmd := &cobra.Command{Use: "consume TOPIC...", Short: "Read records and print them, one per line by default",
		Args: cobra.MinimumNArgs(1),
		Long: `Read records and print them as --format says.

--from is where to start: beginning, end, an offset (42), an offset
relative to the start (+10) or to the end (-10), or a time (@2026-12-01T10:00:00Z,
@1764583200000 in milliseconds, @-15m for 15 minutes ago). With --group
the group's committed offsets come first and --from applies where there is
none; the records printed are committed when the command ends. A group
takes a member only with an assignor its members offer: --assignor names
those this one offers (cooperative-sticky by default), and a refused join
says which the group runs.

With --share-group the command is a member of a share group (KIP-932,
share.version 1): the group hands it records, which it accepts once they
are printed; those it does not print (past --num) go back to the group.
Where a share group starts is its share.auto.offset.reset config.

--format is text with fields: ` + formatVerbs() + `,
%% for a percent sign, and the escapes \n \t \r \0 \\; or json for one
JSON object per record and line.`,
		Example: `  strand consume orders --from beginning --num 3 --format '%k=%v\n'
  strand consume orders --from -10 --exit-at-end --format json
  strand consume orders --group audit --from end
  strand consume orders --group audit --assignor range,cooperative-sticky   # a group whose members offer those
  strand consume tasks --share-group workers --format '%o %c %v\n'           # %c: the record's delivery count`,
		RunE: func(cmd *cobra.Command, topics []string) error { return consume(cmd, topics, o) }}
	f := cmd.Flags()
	brokersFlag(f, &o.brokers)
	f.StringVarP(&o.group, "group", "g", "", "read as a member of this consumer group, committing what was printed")
	f.StringVar(&o.shareGroup, "share-group", "", "read as a member of this share group, accepting what was printed")
	f.StringSliceVar(&o.assignors, "assignor", nil, "with --group, the assignors this member offers, the first preferred: "+
		strings.Join(assignorNames, ", ")+" (default cooperative-sticky); a member joins a group only with an assignor every member offers")
	f.StringVarP(&o.from, "from", "o", "beginning", "where to start (see above)")
	f.StringVarP(&o.format, "format", "f", `%v\n`, "how to print each record (see above)")
	f.Int32SliceVarP(&o.partitions, "partitions", "p", nil, "only these partitions (not with --group)")
	f.IntVarP(&o.num, "num", "n", 0, "exit after this many records (0: no limit)")
	f.BoolVarP(&o.exitAtEnd, "exit-at-end", "e", false, "exit once the partitions are read up to their end offsets at the start")
	f.BoolVar(&o.readCommitted, "read-committed", false, "skip records of open and aborted transactions")
	f.DurationVar(&o.timeout, "timeout", 0, "give up after this long (0: no limit); an error when --num or --exit-at-end is not reached by then")
	return cmd
}

// formatVerbs lists the format fields for the help.
func formatVerbs() string {
	var out []string
	for _, v := range "tpokvKVhTdl" {
		out = append(out, fmt.Sprintf("%%%c %s", v, recordfmt.Verbs[byte(v)]))
	}
	return strings.Join(out, ", ")
}

func consume(cmd *cobra.Command, topics []string, o consumeOptions) error {
	f, err := recordfmt.Parse(o.format)
	if err != nil {
		return err
	}
	start, err := parseFrom(o.from, time.Now())
	if err != nil {
		return err
	}
	if o.group != "" && len(o.partitions) > 0 {
		return errors.New("--partitions reads without a group: the group assigns its members' partitions")
	}
	if o.shareGroup != "" {
		switch {
		case o.group != "":
			return errors.New("--group and --share-group name two groups: a member is of one")
		case len(o.partitions) > 0:
			return errors.New("--partitions reads without a group: the share group hands out its records")
		case cmd.Flags().Changed("from"):
			return errors.New("--from does not apply to a share group: it starts where its share.auto.offset.reset config says")
		case o.exitAtEnd:
			return errors.New("--exit-at-end does not apply to a share group: give --num or --timeout")
		}
	}
	balancers, err := groupBalancers(o.assignors)
	if err != nil {
		return err
	}
	if len(balancers) > 0 && o.group == "" {
		return errors.New("--assignor is for a member of a group: give --group")
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if o.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.timeout)
		defer cancel()
	}
	meta, err := connect(ctx, o.brokers)
	if err != nil {
		return err
	}
	defer meta.Close()
	adm := kadm.NewClient(meta)
	if o.shareGroup != "" {
		return consumeShared(ctx, cmd, adm, topics, o, f)
	}
	pos, ends, err := startPositions(ctx, adm, topics, o.partitions, o.group, start)
	var perr *inspect.PartitionError
	if errors.As(err, &perr) && errors.Is(err, kerr.UnknownTopicOrPartition) {
		return topicNotFound(ctx, adm, perr.Topic, perr.Err)
	} else if err != nil {
		return err
	}
	var opts []kgo.Opt
	if o.readCommitted {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	r := &reading{f: f, num: o.num, pos: pos, ends: ends, exitAtEnd: o.exitAtEnd}
	if o.group != "" {
		// Idle time counts once the group gave the member its partitions.
		opts = append(opts, kgo.ConsumerGroup(o.group), kgo.ConsumeTopics(topics...), kgo.ConsumeResetOffset(start.reset()),
			kgo.AutoCommitMarks(), kgo.OnPartitionsAssigned(func(context.Context, *kgo.Client, map[string][]int32) { r.assigned.Store(true) }))
		if len(balancers) > 0 {
			opts = append(opts, kgo.Balancers(balancers...))
		}
	} else {
		r.assigned.Store(true)
		at := map[string]map[int32]kgo.Offset{}
		for t, ps := range pos {
			at[t] = map[int32]kgo.Offset{}
			for p, o := range ps {
				at[t][p] = kgo.NewOffset().At(o)
			}
		}
		opts = append(opts, kgo.ConsumePartitions(at))
	}
	cl, err := connect(ctx, o.brokers, opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	r.out = bufio.NewWriter(cmd.OutOrStdout())
	if !isTerminal(cmd.OutOrStdout()) {
		// Records go to a file or a pipe: show on the terminal how many.
		r.progress = startProgress(cmd.ErrOrStderr(), "records read")
	}
	err = r.run(ctx, cl)
	if errors.Is(err, kerr.InconsistentGroupProtocol) {
		err = refusedJoin(ctx, adm, o.group, o.assignors, err)
	}
	r.progress.end()
	if ferr := r.out.Flush(); err == nil {
		err = ferr
	}
	if o.group != "" {
		// What was printed is committed, nothing after it.
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if cerr := cl.CommitMarkedOffsets(cctx); cerr != nil && err == nil {
			err = fmt.Errorf("committing: %w", cerr)
		}
	}
	return err
}

// consumeShared reads as a member of a share group: each record printed
// is accepted, the others released; the acknowledgements are sent before
// the command ends.
func consumeShared(ctx context.Context, cmd *cobra.Command, adm *kadm.Client, topics []string, o consumeOptions,
	f *recordfmt.Formatter) error {
	// The topics exist: a share group would wait for them.
	starts, err := adm.ListStartOffsets(ctx, topics...)
	if err == nil {
		err = inspect.ListedError(starts)
	}
	var perr *inspect.PartitionError
	if errors.As(err, &perr) && errors.Is(err, kerr.UnknownTopicOrPartition) {
		return topicNotFound(ctx, adm, perr.Topic, perr.Err)
	} else if err != nil {
		return err
	}
	cl, err := connect(ctx, o.brokers, kgo.ShareGroup(o.shareGroup), kgo.ConsumeTopics(topics...))
	if err != nil {
		return err
	}
	defer cl.Close()
	r := &reading{f: f, num: o.num, share: true, out: bufio.NewWriter(cmd.OutOrStdout())}
	r.assigned.Store(true)
	if !isTerminal(cmd.OutOrStdout()) {
		r.progress = startProgress(cmd.ErrOrStderr(), "records read")
	}
	err = r.run(ctx, cl)
	r.progress.end()
	if ferr := r.out.Flush(); err == nil {
		err = ferr
	}
	fctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if ferr := cl.FlushAcks(fctx); ferr != nil && err == nil {
		err = fmt.Errorf("acknowledging: %w", ferr)
	}
	return err
}

// reading is a consume loop's state.
type reading struct {
	f         *recordfmt.Formatter
	out       *bufio.Writer
	num       int
	printed   int
	pos, ends map[string]map[int32]int64
	exitAtEnd bool
	assigned  atomic.Bool // the consumer has partitions to read
	progress  *progress   // on a terminal, when the records go elsewhere
	share     bool        // a share group member: it accepts what it printed
}

// idleAtEnd is how long a consumer with partitions short of their end
// offsets waits for records before it counts them read: what is left is
// transaction markers, which are never delivered.
const idleAtEnd = time.Second

func (r *reading) run(ctx context.Context, cl *kgo.Client) error {
	var buf []byte
	idle := time.Time{}
	for {
		if r.done() {
			return nil
		}
		pctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		fs := cl.PollRecords(pctx, r.left())
		cancel()
		if ctx.Err() != nil {
			return r.stopped(ctx)
		}
		if err := fetchError(fs); err != nil {
			return err
		}
		n := 0
		var printed, unprinted []*kgo.Record
		fs.EachRecord(func(rec *kgo.Record) {
			if r.num > 0 && r.printed >= r.num {
				unprinted = append(unprinted, rec)
				return
			}
			buf = r.f.Append(buf[:0], rec)
			r.out.Write(buf)
			r.printed++
			n++
			r.progress.add(1)
			if r.pos[rec.Topic] != nil {
				r.pos[rec.Topic][rec.Partition] = rec.Offset + 1
			}
			if r.share {
				printed = append(printed, rec)
			} else {
				cl.MarkCommitRecords(rec)
			}
		})
		if err := r.out.Flush(); err != nil {
			return err
		}
		if r.share {
			// Accepted once written out; the rest go to other members.
			cl.MarkAcks(kgo.AckAccept, printed...)
			cl.MarkAcks(kgo.AckRelease, unprinted...)
		}
		switch {
		case n > 0 || !r.assigned.Load():
			idle = time.Time{}
		case idle.IsZero():
			idle = time.Now()
		case r.exitAtEnd && time.Since(idle) > idleAtEnd:
			return nil
		}
	}
}

// left is how many records the next poll may return.
func (r *reading) left() int {
	if r.num > 0 {
		return r.num - r.printed
	}
	return 10000
}

// done says whether the records asked for are printed.
func (r *reading) done() bool {
	if r.num > 0 && r.printed >= r.num {
		return true
	}
	if !r.exitAtEnd {
		return false
	}
	for t, ps := range r.ends {
		for p, end := range ps {
			if r.pos[t][p] < end {
				return false
			}
		}
	}
	return true
}

// stopped is the result of a loop ended by its context: a signal is a
// clean end, a timeout an error when an end was asked for.
func (r *reading) stopped(ctx context.Context) error {
	if errors.Is(context.Cause(ctx), context.DeadlineExceeded) && (r.num > 0 || r.exitAtEnd) {
		return fmt.Errorf("timed out after %d records", r.printed)
	}
	return nil
}

// fetchError is the first error of a poll that is not the client's own
// stop, naming its partition; the group's errors come without one.
func fetchError(fs kgo.Fetches) error {
	var err error
	fs.EachError(func(t string, p int32, e error) {
		switch {
		case err != nil || errors.Is(e, context.DeadlineExceeded) || errors.Is(e, context.Canceled) || errors.Is(e, kgo.ErrClientClosed):
		case t == "":
			err = e
		default:
			err = fmt.Errorf("%s[%d]: %w", t, p, e)
		}
	})
	return err
}

// assignorNames are the classic group assignors a member can offer, as
// Kafka's clients name them.
var assignorNames = []string{"range", "roundrobin", "sticky", "cooperative-sticky"}

// groupBalancers are the assignors of --assignor, as the client's.
func groupBalancers(names []string) ([]kgo.GroupBalancer, error) {
	var out []kgo.GroupBalancer
	for _, n := range names {
		switch n {
		case "range":
			out = append(out, kgo.RangeBalancer())
		case "roundrobin":
			out = append(out, kgo.RoundRobinBalancer())
		case "sticky":
			out = append(out, kgo.StickyBalancer())
		case "cooperative-sticky":
			out = append(out, kgo.CooperativeStickyBalancer())
		default:
			return nil, fmt.Errorf("--assignor %q: one of %s%s", n, strings.Join(assignorNames, ", "), didYouMean("%s", closest(n, assignorNames)))
		}
	}
	return out, nil
}

// refusedJoin explains the group's refusal of this member
// (INCONSISTENT_GROUP_PROTOCOL): which assignor or protocol the group's
// members use, and how to join with it.
func refusedJoin(ctx context.Context, adm *kadm.Client, group string, offered []string, err error) error {
	if len(offered) == 0 {
		offered = []string{"cooperative-sticky"}
	}
	g, derr := inspect.ReadGroup(ctx, adm, group)
	switch {
	case derr != nil:
	case g.Type == "consumer":
		return fmt.Errorf("group %s is a consumer group (KIP-848: the broker assigns) and refuses classic members "+
			"as its group.consumer.migration.policy says: %w", group, err)
	case g.ProtocolType != "" && g.ProtocolType != "consumer":
		return fmt.Errorf("group %s is a group of %s clients, not of consumers: %w", group, g.ProtocolType, err)
	case g.Protocol != "":
		return fmt.Errorf("group %s's members use the %s assignor, which this member does not offer (it offers %s): "+
			"join with --assignor %s: %w", group, g.Protocol, strings.Join(offered, ", "), g.Protocol, err)
	}
	return fmt.Errorf("group %s's members use an assignor this member does not offer (it offers %s): "+
		"pass theirs with --assignor (%s): %w", group, strings.Join(offered, ", "), strings.Join(assignorNames, ", "), err)
}

// startSpec is where --from says to start.
type startSpec struct {
	kind string // beginning, end, offset, after-start, before-end or time
	n    int64  // the offset, the count, or the time in milliseconds
}

// parseFrom reads --from.
func parseFrom(s string, now time.Time) (startSpec, error) {
	switch {
	case s == "beginning" || s == "start":
		return startSpec{kind: "beginning"}, nil
	case s == "end":
		return startSpec{kind: "end"}, nil
	case strings.HasPrefix(s, "@"):
		t := s[1:]
		if d, err := time.ParseDuration(t); err == nil && d < 0 {
			return startSpec{kind: "time", n: now.Add(d).UnixMilli()}, nil
		}
		if ms, err := strconv.ParseInt(t, 10, 64); err == nil && ms >= 0 {
			return startSpec{kind: "time", n: ms}, nil
		}
		if ts, err := time.Parse(time.RFC3339Nano, t); err == nil {
			return startSpec{kind: "time", n: ts.UnixMilli()}, nil
		}
		return startSpec{}, fmt.Errorf("--from %q: a time is @RFC3339, @milliseconds or @-duration", s)
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return startSpec{}, fmt.Errorf("--from %q: beginning, end, N, +N, -N or @time", s)
	}
	switch {
	case strings.HasPrefix(s, "+"):
		return startSpec{kind: "after-start", n: n}, nil
	case strings.HasPrefix(s, "-"):
		return startSpec{kind: "before-end", n: -n}, nil
	}
	return startSpec{kind: "offset", n: n}, nil
}

// reset is the spec as a group's reset offset, for partitions without a
// commit.
func (s startSpec) reset() kgo.Offset {
	o := kgo.NewOffset()
	switch s.kind {
	case "end":
		return o.AtEnd()
	case "offset":
		return o.At(s.n)
	case "after-start":
		return o.AtStart().Relative(s.n)
	case "before-end":
		return o.AtEnd().Relative(-s.n)
	case "time":
		return o.AfterMilli(s.n)
	}
	return o.AtStart()
}

// startPositions is where each partition of topics (only, when given) is
// read from, and where it ends now: the group's commits, else the spec's
// offset within the partition's start and end.
func startPositions(ctx context.Context, adm *kadm.Client, topics []string, only []int32, group string,
	s startSpec) (pos, ends map[string]map[int32]int64, err error) {
	starts, err := adm.ListStartOffsets(ctx, topics...)
	if err == nil {
		err = inspect.ListedError(starts)
	}
	if err != nil {
		return nil, nil, err
	}
	endOffs, err := adm.ListEndOffsets(ctx, topics...)
	if err == nil {
		err = inspect.ListedError(endOffs)
	}
	if err != nil {
		return nil, nil, err
	}
	var at kadm.ListedOffsets
	if s.kind == "time" {
		if at, err = adm.ListOffsetsAfterMilli(ctx, s.n, topics...); err == nil {
			err = inspect.ListedError(at)
		}
		if err != nil {
			return nil, nil, err
		}
	}
	var committed kadm.OffsetResponses
	if group != "" {
		if committed, err = inspect.FetchOffsets(ctx, adm, group); err == nil {
			err = committed.Error()
		}
		if err != nil {
			return nil, nil, err
		}
	}
	pos, ends = map[string]map[int32]int64{}, map[string]map[int32]int64{}
	var missing []string
	endOffs.Each(func(e kadm.ListedOffset) {
		if len(only) > 0 && !slices.Contains(only, e.Partition) {
			return
		}
		first, _ := starts.Lookup(e.Topic, e.Partition)
		p := s.within(first.Offset, e.Offset, at, e.Topic, e.Partition)
		if c, ok := committed.Lookup(e.Topic, e.Partition); ok && c.At >= 0 {
			p = c.At
		}
		if pos[e.Topic] == nil {
			pos[e.Topic], ends[e.Topic] = map[int32]int64{}, map[int32]int64{}
		}
		pos[e.Topic][e.Partition], ends[e.Topic][e.Partition] = p, e.Offset
	})
	for _, t := range topics {
		if len(pos[t]) == 0 {
			missing = append(missing, t)
		}
	}
	if len(missing) > 0 {
		return nil, nil, fmt.Errorf("no partitions to read of %s", strings.Join(missing, ", "))
	}
	return pos, ends, nil
}

// within is the spec's offset in a partition from start to end.
func (s startSpec) within(start, end int64, at kadm.ListedOffsets, topic string, partition int32) int64 {
	var p int64
	switch s.kind {
	case "beginning":
		p = start
	case "end":
		p = end
	case "offset":
		p = s.n
	case "after-start":
		p = start + s.n
	case "before-end":
		p = end - s.n
	case "time":
		p = end
		if o, ok := at.Lookup(topic, partition); ok && o.Offset >= 0 {
			p = o.Offset
		}
	}
	return min(max(p, start), end)
}
