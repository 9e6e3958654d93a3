// Package server is the composition root: it opens the data directory,
// wires the log, replica, cluster, group and protocol packages together, listens
// for Kafka clients and serves their connections.
//
// A connection has two goroutines. The reader reads a frame, decodes it
// with kmsg, and runs the handler's synchronous part in arrival order (so a
// producer's pipelined batches are appended in the order sent). The writer
// takes the answers in the same order, finishes any deferred part (waiting
// for an fsync or for fetchable data) and writes them, sending stored
// record data with sendfile. So up to maxInFlight requests may be read ahead
// while their responses go out in order. Frames over the size limit, unknown
// API keys and unsupported versions (but ApiVersions') close the connection
// with a log line, as Kafka does.
//
// Coordinators follow leadership: after every metadata change
// (followMetadata, then syncCoordinators) the group coordinator serves the
// __consumer_offsets partitions this broker leads and the transaction
// coordinator the __transaction_state ones, loading those it has come to
// lead and unloading the others. Every coordinator's topic and partitions
// are one adapter each (coordinators.go: coordinatorTopic and
// coordinatorPartition, the coordinator runtime's Topic and Partition over
// a replica, acknowledged by every in-sync replica). What crosses brokers is orchestrated here
// (txns.go), through the peer client: the transaction coordinator's
// markers go to each partition's leader (WriteTxnMarkers, one request per
// broker, leaders looked up again on every retry), and a partition leader
// asks a transaction's coordinator on another broker before it appends the
// transaction's batches (AddPartitionsToTxn v5, KIP-890).
//
// Lifecycle: New first takes the data directory's lock (and, for a member
// of the metadata quorum, the lock of its __cluster_metadata-0 directory;
// datadir.go, layout in package dirlock), so a second broker on the same
// directory, in this process or another, fails before reading anything.
// Then it opens the metadata, the logs, the partitions and the
// coordinators; if any step fails, what was opened is closed in reverse
// order and the locks released (closeOpened), so New either returns a
// Server or leaves nothing behind. Start binds the listeners (the
// controller listener is bound by New, with the metadata quorum) and the
// admin listener; when one cannot bind it closes what it bound and
// returns an error naming the listener and its address. Shutdown may
// follow a failed Start and may be called again: each part is stopped
// once, and the locks are released last. Every goroutine is started
// through Server.goroutines and ends before Shutdown returns.
package server
