package raft

import (
	pb "go.etcd.io/raft/v3/raftpb"
)

// Transport carries Raft messages between the nodes. Its implementations
// are this package's: NewTCPTransport for real use and MemNetwork.Endpoint
// in tests. Start hands a Transport to the Node, which starts it, tells it
// the peers' addresses as it learns them, and closes it on Close (or when
// Start fails).
//
// A transport may drop, delay and reorder messages (Raft tolerates all
// three) but must not block the node's loop: send queues and returns.
type Transport interface {
	// start begins delivering inbound messages to h. Every goroutine the
	// transport needs is started with spawn, which the node tracks. The
	// incarnation names this process: it travels with what it sends, so
	// that a peer tells a restarted or duplicate process of the same node
	// id from the one before.
	start(self uint64, incarnation string, h handler, spawn func(func())) error
	// send queues messages; it is called from the node's loop only, and
	// marshals them there (Raft's messages must not be marshalled while
	// the loop changes its log).
	send(msgs []*pb.Message)
	// addPeer sets (or changes) a peer's address; removePeer forgets it.
	addPeer(id uint64, addr string)
	removePeer(id uint64)
	// close stops every goroutine the transport started (the node waits
	// for them) and releases its sockets. It is safe to call unstarted.
	close() error
}

// handler is the node's side of a transport. Its methods are called from
// the transport's goroutines (and reports also from send, on the loop), so
// they never block for long: receive waits until the loop takes the message
// or stops; reports are queued.
type handler interface {
	// receive delivers a message and the incarnation of the process that
	// sent it ("" when the sender gave none).
	receive(m *pb.Message, incarnation string)
	// unreachable reports that a message to id could not be sent.
	unreachable(id uint64)
	// refused reports whether a connection to id was just refused (no
	// process listens at its address) or made.
	refused(id uint64, refused bool)
	// snapshotStatus reports whether a MsgSnap to id was sent.
	snapshotStatus(id uint64, failed bool)
	// logID is the id that log lines name a member by (Config.LogID).
	logID(id uint64) int64
}
