package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/strandlog/strand/internal/cluster"
	"github.com/strandlog/strand/internal/config"
	"github.com/strandlog/strand/internal/model"
	"github.com/strandlog/strand/internal/protocol"
	"github.com/strandlog/strand/internal/replica"
	"github.com/strandlog/strand/internal/txn"
)

// stateTopicConfigs are __transaction_state's topic configs, as Kafka
// creates it: compacted, transaction.state.log.segment.bytes' 100 MiB
// segments.
var stateTopicConfigs = map[string]string{"cleanup.policy": "compact", "segment.bytes": "104857600"}

func txnConfig(cfg config.Broker, logger *slog.Logger) txn.Config {
	t := txn.Defaults()
	t.StatePartitions = cfg.TransactionStatePartitions
	t.MaxTimeout = cfg.TransactionMaxTimeout
	t.IDExpiration = cfg.TransactionalIDExpiration
	t.AbortCheckInterval = cfg.TransactionAbortCheck
	t.Logger = logger
	return t
}

// stateTopic is __transaction_state for the transaction coordinator
// (txn.Topic).
type stateTopic struct{ s *Server }

func (st stateTopic) Partitions() ([]txn.Partition, error) {
	t, ok := st.s.cluster.Topic(txn.StateTopic)
	if !ok {
		return nil, nil
	}
	return st.partitions(t)
}

func (st stateTopic) Create(n int32) ([]txn.Partition, error) {
	t, err := st.s.topics.createInternal(txn.StateTopic, n, stateTopicConfigs)
	if err != nil {
		return nil, err
	}
	return st.partitions(t)
}

func (st stateTopic) partitions(t cluster.Topic) ([]txn.Partition, error) {
	parts := make([]txn.Partition, t.Partitions)
	for i := range t.Partitions {
		if p, ok := st.s.leadingReplica(t.Name, i); ok {
			parts[i] = statePartition{p}
		}
	}
	return parts, nil
}

// statePartition is one partition of __transaction_state (txn.Partition).
type statePartition struct{ p *replica.Partition }

func (sp statePartition) Append(batch []byte) (int64, func() error, error) {
	res, wait, err := sp.p.AppendInternal(batch)
	return res.BaseOffset, wait, err
}

func (sp statePartition) Read(offset int64, maxBytes int) ([]byte, error) {
	sec, err := sp.p.Read(offset, maxBytes, false)
	if err != nil {
		return nil, err
	}
	return sec.ReadAll()
}

func (sp statePartition) StartOffset() int64   { return sp.p.Log().StartOffset() }
func (sp statePartition) HighWatermark() int64 { return sp.p.HighWatermark() }

// markerWriter writes the coordinator's transaction markers (txn.Markers)
// through the same path as WriteTxnMarkers requests.
type markerWriter struct {
	broker *protocol.Broker
	logger *slog.Logger
}

// WriteMarkers skips partitions that no longer exist and markers the
// partition refuses for an older producer epoch (a newer transaction
// already moved past them), as Kafka's marker channel does; any other
// failure, a coordinator-epoch fence included (this node is the only
// coordinator, so the partition must take its markers), is returned for
// the coordinator to retry.
func (m markerWriter) WriteMarkers(_ context.Context, pid int64, epoch int16, commit bool, coordinatorEpoch int32,
	tps []model.TopicPartition) error {
	errs := m.broker.WriteMarkers(replica.Marker{ProducerID: pid, ProducerEpoch: epoch, Commit: commit,
		CoordinatorEpoch: coordinatorEpoch}, tps)
	var failed error
	for i, err := range errs {
		switch {
		case err == nil:
		case errors.Is(err, replica.ErrUnknownPartition):
			m.logger.Info("transaction marker skipped: partition gone", "partition", tps[i].String(), "producer", pid)
		case errors.Is(err, replica.ErrInvalidProducerEpoch):
			m.logger.Warn("transaction marker refused as stale", "partition", tps[i].String(), "producer", pid,
				"epoch", epoch, "err", err)
		default:
			failed = errors.Join(failed, fmt.Errorf("%s: %w", tps[i], err))
		}
	}
	return failed
}
