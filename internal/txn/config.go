package txn

import (
	"log/slog"
	"time"

	"github.com/strandlog/strand/internal/coordinator"
)

// Config holds the coordinator's settings, under Kafka's broker config
// names. Defaults gives Kafka 4's defaults; a zero or negative field takes
// its default.
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

// Defaults returns Kafka 4's defaults.
func Defaults() Config {
	return Config{
		StatePartitions:     50,
		MaxTimeout:          15 * time.Minute,
		IDExpiration:        7 * 24 * time.Hour,
		AbortCheckInterval:  10 * time.Second,
		ExpiryCheckInterval: time.Hour,
		MarkerRetryBackoff:  100 * time.Millisecond,
	}
}

// withDefaults fills the fields whose zero value means nothing sensible.
func (c Config) withDefaults() Config {
	d := Defaults()
	if c.StatePartitions <= 0 {
		c.StatePartitions = d.StatePartitions
	}
	if c.MaxTimeout <= 0 {
		c.MaxTimeout = d.MaxTimeout
	}
	if c.IDExpiration <= 0 {
		c.IDExpiration = d.IDExpiration
	}
	if c.AbortCheckInterval <= 0 {
		c.AbortCheckInterval = d.AbortCheckInterval
	}
	if c.ExpiryCheckInterval <= 0 {
		c.ExpiryCheckInterval = d.ExpiryCheckInterval
	}
	if c.MarkerRetryBackoff <= 0 {
		c.MarkerRetryBackoff = d.MarkerRetryBackoff
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
