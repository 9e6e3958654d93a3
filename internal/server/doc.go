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
// Lifecycle: every goroutine is started through Server.goroutines and
// ends before Shutdown returns.
package server
