package txn

import (
	"log/slog"
	"time"

	"github.com/strandlog/strand/internal/coordinator"
)

// Config holds the coordinator's settings, under Kafka's broker config
// names, and its wiring. The settings are taken as given: the broker's
// configuration (config.BrokerDefs) has their defaults and bounds.
type Config struct {
	// StatePartitions is transaction.state.log.num.partitions: the
	// partitions of __transaction_state when the coordinator creates it.
	// An existing topic keeps its count.
	StatePartitions int32
	// MaxTimeout is transaction.max.timeout.ms: the longest transaction
	// timeout a producer may ask for.
	MaxTimeout time.Duration
	// IDExpiration is transactional.id.expiration.ms: how long an id with
	// no transaction in progress (Empty, CompleteCommit, CompleteAbort)
	// is kept without any request before it is removed.
	IDExpiration time.Duration
	// AbortCheckInterval is
	// transaction.abort.timed.out.transaction.cleanup.interval.ms: how
	// often Ongoing transactions are checked against their timeout.
	AbortCheckInterval time.Duration
	// ExpiryCheckInterval is
	// transaction.remove.expired.transaction.cleanup.interval.ms.
	ExpiryCheckInterval time.Duration
	// MarkerRetryBackoff is how long the coordinator waits before writing
	// the markers of a PrepareCommit/PrepareAbort again after a failure
	// (Kafka's marker channel retries with retry.backoff.ms).
	MarkerRetryBackoff time.Duration

	Clock  Clock
	Logger *slog.Logger
}

// withDefaults fills the internals left zero. The settings are the
// broker's (config.BrokerDefs holds their defaults and bounds, and the
// server gives every one).
func (c Config) withDefaults() Config {
	if c.ExpiryCheckInterval <= 0 {
		c.ExpiryCheckInterval = time.Hour
	}
	if c.MarkerRetryBackoff <= 0 {
		c.MarkerRetryBackoff = 100 * time.Millisecond
	}
	if c.Clock == nil {
		c.Clock = coordinator.RealClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	c.Logger = c.Logger.With("component", "txn")
	return c
}

// Clock is the time source of the coordinator (the coordinator runtime's;
// tests use its ManualClock).
type Clock = coordinator.Clock

// Stopper cancels an AfterFunc.
type Stopper = coordinator.Stopper
