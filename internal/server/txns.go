package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/cluster"
	"github.com/strandlog/strand/internal/config"
	"github.com/strandlog/strand/internal/model"
	"github.com/strandlog/strand/internal/peer"
	"github.com/strandlog/strand/internal/protocol"
	"github.com/strandlog/strand/internal/replica"
	"github.com/strandlog/strand/internal/txn"
)

// stateTopicConfigs are __transaction_state's topic configs, as Kafka
// creates it: compacted, transaction.state.log.segment.bytes' 100 MiB
// segments.
var stateTopicConfigs = map[string]string{"cleanup.policy": "compact", "segment.bytes": "104857600"}

func txnConfig(cfg config.Broker, logger *slog.Logger) txn.Config {
	var t txn.Config
	t.StatePartitions = cfg.TransactionStatePartitions
	t.MaxTimeout = cfg.TransactionMaxTimeout
	t.IDExpiration = cfg.TransactionalIDExpiration
	t.AbortCheckInterval = cfg.TransactionAbortCheck
	t.Logger = logger
	return t
}

// newTxnCoordinator wires the transaction coordinator: its state in
// __transaction_state, producer ids from the cluster metadata, markers
// written here or sent to the partitions' leaders, and other brokers'
// coordinators asked through the peer client.
func (s *Server) newTxnCoordinator(logger *slog.Logger) *txn.Coordinator {
	return txn.New(txnConfig(s.cfg, logger), s.coordinatorTopic(txn.StateTopic, stateTopicConfigs, s.cfg.TransactionStateReplicationFactor), s.cluster,
		markerWriter{self: s.cfg.NodeID, metadata: s.cluster, peers: s.peers, broker: s.broker, logger: logger.With("component", "txn")},
		remoteCoordinators{self: s.cfg.NodeID, metadata: s.cluster, peers: s.peers})
}

// syncTxnCoordinator makes the transaction coordinator serve exactly the
// __transaction_state partitions this broker leads, each at its current
// leader epoch (a partition led again at a newer epoch is unloaded and
// loaded again, so its markers carry the new coordinator epoch). Called by
// syncCoordinators, never under the coordinator's lock.
func (s *Server) syncTxnCoordinator() {
	t, ok := s.cluster.Topic(txn.StateTopic)
	if !ok {
		return
	}
	for i := range t.Partitions {
		p, leads := leadingReplica(s.replicas, t.Name, i)
		epoch, serves := s.txns.Serves(i)
		if serves && (!leads || epoch != p.LeaderEpoch()) {
			s.txns.UnloadPartition(i)
			serves = false
		}
		if leads && !serves {
			if err := s.txns.LoadPartition(i, t.Partitions, coordinatorPartition{p}); err != nil {
				s.logger.Warn("loading transactional ids failed", "partition", i, "err", err)
			}
		}
	}
}

// Marker retries: a partition that cannot take its marker now (its leader
// moving, or not known yet to the broker asked) is tried again after a
// backoff that doubles from markerRetryMin to markerRetryMax, for up to
// markerRetryWindow; then WriteMarkers fails and the coordinator retries it
// whole in the background (so that EndTxn answers meanwhile).
const (
	markerRetryMin    = 20 * time.Millisecond
	markerRetryMax    = 500 * time.Millisecond
	markerRetryWindow = 3 * time.Second
	// peerTimeout bounds one request to another broker.
	peerTimeout = 10 * time.Second
)

// markerWriter writes the coordinator's transaction markers (txn.Markers):
// to a partition this broker leads through the same path as
// WriteTxnMarkers requests (protocol.Broker.WriteMarkers, which also tells
// the group coordinator about __consumer_offsets), to any other as
// WriteTxnMarkers v1 to its leader, one request per broker, the brokers
// asked at once. Each round looks the leaders up again in the metadata,
// so a partition whose leader moved (NOT_LEADER_OR_FOLLOWER) goes to the
// new one.
type markerWriter struct {
	self     int32
	metadata *cluster.Store
	peers    *peer.Client
	broker   *protocol.Broker // writes the markers of the partitions led here
	logger   *slog.Logger
}

// markerOutcome sorts a partition's answer to a marker.
type markerOutcome int

const (
	markerDone  markerOutcome = iota // durable
	markerSkip                       // gone, or refused as stale: nothing to write
	markerRetry                      // not taken now
)

// WriteMarkers skips partitions that no longer exist and markers a
// partition refuses for an older producer epoch (a newer transaction
// already moved past them), as Kafka's marker channel does; any other
// failure, a coordinator-epoch fence included, is retried and, past the
// retry window, returned for the coordinator to retry.
func (m markerWriter) WriteMarkers(ctx context.Context, pid int64, epoch int16, commit bool, coordinatorEpoch int32,
	tps []model.TopicPartition) error {
	marker := replica.Marker{ProducerID: pid, ProducerEpoch: epoch, Commit: commit, CoordinatorEpoch: coordinatorEpoch}
	pending := slices.Clone(tps)
	deadline := time.Now().Add(markerRetryWindow)
	backoff := markerRetryMin
	for {
		failed := m.round(ctx, marker, pending)
		if len(failed) == 0 {
			return nil
		}
		var errs error
		pending = pending[:0]
		for tp, err := range failed {
			pending = append(pending, tp)
			errs = errors.Join(errs, fmt.Errorf("%s: %w", tp, err))
		}
		if ctx.Err() != nil || time.Now().Add(backoff).After(deadline) {
			return errs
		}
		select {
		case <-ctx.Done():
			return errors.Join(ctx.Err(), errs)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, markerRetryMax)
	}
}

// round writes marker to every partition of tps once and returns those to
// try again, with their errors.
func (m markerWriter) round(ctx context.Context, marker replica.Marker, tps []model.TopicPartition) map[model.TopicPartition]error {
	self := m.self
	failed := map[model.TopicPartition]error{}
	byLeader := map[int32][]model.TopicPartition{}
	for _, tp := range tps {
		st, ok := m.metadata.Partition(tp.Topic, tp.Partition)
		switch {
		case !ok:
			m.logger.Info("transaction marker skipped: partition gone", "partition", tp.String(), "producer", marker.ProducerID)
		case st.Leader == cluster.NoLeader:
			failed[tp] = fmt.Errorf("no leader at epoch %d", st.LeaderEpoch)
		default:
			byLeader[st.Leader] = append(byLeader[st.Leader], tp)
		}
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for node, tps := range byLeader {
		wg.Go(func() {
			var errs []error
			if node == self {
				errs = m.broker.WriteMarkers(marker, tps)
			} else {
				errs = m.remote(ctx, node, marker, tps)
			}
			mu.Lock()
			defer mu.Unlock()
			for i, err := range errs {
				if m.outcome(tps[i], marker, node, err) == markerRetry {
					failed[tps[i]] = err
				}
			}
		})
	}
	wg.Wait()
	return failed
}

// outcome sorts one partition's answer, logging the skipped ones.
func (m markerWriter) outcome(tp model.TopicPartition, marker replica.Marker, node int32, err error) markerOutcome {
	switch {
	case err == nil:
		return markerDone
	case errors.Is(err, replica.ErrInvalidProducerEpoch) || errors.Is(err, kerr.InvalidProducerEpoch):
		m.logger.Warn("transaction marker refused as stale", "partition", tp.String(), "producer", marker.ProducerID,
			"epoch", marker.ProducerEpoch, "leader", node, "err", err)
		return markerSkip
	case errors.Is(err, replica.ErrUnknownPartition):
		// This broker's metadata knows no such partition (a remote
		// UNKNOWN_TOPIC_OR_PARTITION is retried: the next round skips it
		// if the partition is gone here too).
		m.logger.Info("transaction marker skipped: partition gone", "partition", tp.String(), "producer", marker.ProducerID)
		return markerSkip
	}
	return markerRetry
}

// remote sends marker for tps to their leader node as WriteTxnMarkers and
// returns one error per partition: nil once durable there, a *kerr.Error
// for a refusal, the request's failure for every partition if it got no
// answer.
func (m markerWriter) remote(ctx context.Context, node int32, marker replica.Marker, tps []model.TopicPartition) []error {
	errs := make([]error, len(tps))
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	req.SetVersion(1)
	rm := kmsg.NewWriteTxnMarkersRequestMarker()
	rm.ProducerID, rm.ProducerEpoch, rm.Committed, rm.CoordinatorEpoch = marker.ProducerID, marker.ProducerEpoch,
		marker.Commit, marker.CoordinatorEpoch
	rm.Topics = requestTopics(tps, func(topic string, parts []int32) kmsg.WriteTxnMarkersRequestMarkerTopic {
		t := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
		t.Topic, t.Partitions = topic, parts
		return t
	})
	req.Markers = append(req.Markers, rm)
	ctx, cancel := context.WithTimeout(ctx, peerTimeout)
	defer cancel()
	raw, err := m.peers.Request(ctx, node, req)
	if err != nil {
		for i := range errs {
			errs[i] = fmt.Errorf("writing the marker at broker %d: %w", node, err)
		}
		return errs
	}
	codes := map[model.TopicPartition]int16{}
	for _, rm := range raw.(*kmsg.WriteTxnMarkersResponse).Markers {
		if rm.ProducerID != marker.ProducerID {
			continue
		}
		for _, t := range rm.Topics {
			for _, p := range t.Partitions {
				codes[model.TopicPartition{Topic: t.Topic, Partition: p.Partition}] = p.ErrorCode
			}
		}
	}
	for i, tp := range tps {
		code, ok := codes[tp]
		switch {
		case !ok:
			errs[i] = fmt.Errorf("broker %d did not answer for %s", node, tp)
		case code != 0:
			errs[i] = kerr.ErrorForCode(code)
		}
	}
	return errs
}

// requestTopics groups tps by topic, in order of first appearance, into a
// request's topic entries.
func requestTopics[T any](tps []model.TopicPartition, entry func(topic string, partitions []int32) T) []T {
	var order []string
	parts := map[string][]int32{}
	for _, tp := range tps {
		if _, ok := parts[tp.Topic]; !ok {
			order = append(order, tp.Topic)
		}
		parts[tp.Topic] = append(parts[tp.Topic], tp.Partition)
	}
	out := make([]T, 0, len(order))
	for _, topic := range order {
		out = append(out, entry(topic, parts[topic]))
	}
	return out
}

// remoteCoordinators asks other brokers' transaction coordinators what a
// partition leader must know before it appends a transactional batch
// (txn.Remote), as Kafka's AddPartitionsToTxnManager does: one
// AddPartitionsToTxn v5 to the coordinator (the leader of the id's
// __transaction_state partition, FindCoordinator's rule), VerifyOnly for
// the older protocol's verification, adding for KIP-890's.
type remoteCoordinators struct {
	self     int32
	metadata *cluster.Store
	peers    *peer.Client
}

func (r remoteCoordinators) CheckPartitions(ctx context.Context, id string, pid int64, epoch int16,
	tps []model.TopicPartition, add bool) []error {
	errs := make([]error, len(tps))
	all := func(err error) []error {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	t, ok := r.metadata.Topic(txn.StateTopic)
	if !ok || t.Partitions <= 0 {
		return all(fmt.Errorf("%w: %s is not known here yet", txn.ErrNotCoordinator, txn.StateTopic))
	}
	i := model.CoordinatorPartition(id, t.Partitions)
	switch node := t.States[i].Leader; node {
	case cluster.NoLeader:
		return all(fmt.Errorf("%w: %s-%d has no leader", txn.ErrNotCoordinator, txn.StateTopic, i))
	case r.self:
		// Led here, and about to be loaded (syncCoordinators).
		return all(fmt.Errorf("%w: %s-%d", txn.ErrCoordinatorLoadInProgress, txn.StateTopic, i))
	default:
		return r.ask(ctx, node, id, pid, epoch, tps, add)
	}
}

func (r remoteCoordinators) ask(ctx context.Context, node int32, id string, pid int64, epoch int16,
	tps []model.TopicPartition, add bool) []error {
	errs := make([]error, len(tps))
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.SetVersion(5)
	rt := kmsg.NewAddPartitionsToTxnRequestTransaction()
	rt.TransactionalID, rt.ProducerID, rt.ProducerEpoch, rt.VerifyOnly = id, pid, epoch, !add
	rt.Topics = requestTopics(tps, func(topic string, parts []int32) kmsg.AddPartitionsToTxnRequestTransactionTopic {
		t := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
		t.Topic, t.Partitions = topic, parts
		return t
	})
	req.Transactions = append(req.Transactions, rt)
	ctx, cancel := context.WithTimeout(ctx, peerTimeout)
	defer cancel()
	raw, err := r.peers.Request(ctx, node, req)
	if err != nil {
		err = fmt.Errorf("%w: asking the coordinator, broker %d: %v", txn.ErrNotCoordinator, node, err)
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	resp := raw.(*kmsg.AddPartitionsToTxnResponse)
	codes := map[model.TopicPartition]int16{}
	for _, st := range resp.Transactions {
		if st.TransactionalID != id {
			continue
		}
		for _, t := range st.Topics {
			for _, p := range t.Partitions {
				codes[model.TopicPartition{Topic: t.Topic, Partition: p.Partition}] = p.ErrorCode
			}
		}
	}
	for i, tp := range tps {
		code, ok := codes[tp]
		switch {
		case resp.ErrorCode != 0:
			code = resp.ErrorCode
		case !ok:
			code = kerr.UnknownServerError.Code
		}
		errs[i] = coordinatorError(node, code)
	}
	return errs
}

// coordinatorErrors are the coordinator's answers to AddPartitionsToTxn as
// the txn package's errors, so that the partition leader answers its
// producer as a local coordinator's answer would be answered.
var coordinatorErrors = map[int16]error{
	kerr.ConcurrentTransactions.Code:    txn.ErrConcurrentTransactions,
	kerr.InvalidTxnState.Code:           txn.ErrInvalidTxnState,
	kerr.ProducerFenced.Code:            txn.ErrProducerFenced,
	kerr.InvalidProducerEpoch.Code:      txn.ErrProducerFenced,
	kerr.InvalidProducerIDMapping.Code:  txn.ErrInvalidProducerIDMapping,
	kerr.NotCoordinator.Code:            txn.ErrNotCoordinator,
	kerr.CoordinatorNotAvailable.Code:   txn.ErrNotCoordinator,
	kerr.CoordinatorLoadInProgress.Code: txn.ErrCoordinatorLoadInProgress,
	kerr.InvalidRequest.Code:            txn.ErrInvalidRequest,
}

func coordinatorError(node int32, code int16) error {
	if code == 0 {
		return nil
	}
	if err, ok := coordinatorErrors[code]; ok {
		return fmt.Errorf("%w (the coordinator, broker %d)", err, node)
	}
	return fmt.Errorf("the coordinator, broker %d: %w", node, kerr.ErrorForCode(code))
}
