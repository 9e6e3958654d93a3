package txn

import "errors"

// Errors of the transaction coordinator. protocol/errors.go maps each to its
// Kafka code; the names say which.
var (
	// ErrConcurrentTransactions: the transactional id is between two states
	// (a record is being made durable, or markers are being written for a
	// PrepareCommit/PrepareAbort); clients back off and retry.
	ErrConcurrentTransactions = errors.New("txn: concurrent transactions")
	// ErrInvalidTxnState: the request does not fit the transaction's state
	// (commit of an aborted transaction, EndTxn of an empty one, ...).
	ErrInvalidTxnState = errors.New("txn: invalid transaction state")
	// ErrProducerFenced: the producer epoch is not the current one: another
	// producer with the same transactional id took over, or the
	// coordinator aborted the transaction on timeout.
	ErrProducerFenced = errors.New("txn: producer fenced")
	// ErrInvalidProducerIDMapping: the transactional id is unknown or
	// belongs to another producer id.
	ErrInvalidProducerIDMapping = errors.New("txn: invalid producer id mapping")
	// ErrInvalidTransactionTimeout: the timeout is not positive or exceeds
	// transaction.max.timeout.ms.
	ErrInvalidTransactionTimeout = errors.New("txn: invalid transaction timeout")
	// ErrTransactionalIDNotFound: DescribeTransactions of an unknown id.
	ErrTransactionalIDNotFound = errors.New("txn: transactional id not found")
	// ErrNotCoordinator: the id's __transaction_state partition is not
	// served by this broker (another broker leads it, or none does), the
	// coordinator is closed, or __transaction_state could not be created
	// or failed to take a write (Kafka answers NOT_COORDINATOR or
	// COORDINATOR_NOT_AVAILABLE; clients find the coordinator again and
	// retry either way).
	ErrNotCoordinator = errors.New("txn: not coordinator")
	// ErrCoordinatorLoadInProgress: Load has not finished, or the id's
	// partition is being loaded.
	ErrCoordinatorLoadInProgress = errors.New("txn: coordinator load in progress")
	// ErrInvalidRequest: an empty transactional id (the protocol layer
	// normally rejects it first).
	ErrInvalidRequest = errors.New("txn: invalid request")
)
