package raft

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// TCPConfig configures a TCP transport.
type TCPConfig struct {
	// Listen is the address to listen on, e.g. "127.0.0.1:0"; Addr returns
	// the address taken.
	Listen string
	// QueueSize is how many messages wait per peer before new ones are
	// dropped (Raft resends). Default 1024.
	QueueSize int
	// DialTimeout bounds one connection attempt. Default 1s.
	DialTimeout time.Duration
	// MaxBackoff is the longest wait between connection attempts to a peer;
	// waits start at 20ms and double. Default 1s.
	MaxBackoff time.Duration
	// WriteTimeout bounds writing one batch of frames to a peer. Default 5s.
	WriteTimeout time.Duration
	// TLS, when set, makes the listener serve TLS with it; its ClientAuth
	// says whether peers must present a certificate.
	TLS *tls.Config
	// DialTLS, when set, makes connections to peers TLS; without a
	// ServerName the peer's host is checked against its certificate.
	DialTLS *tls.Config
	Logger  *slog.Logger
}

// TCPTransport carries Raft messages over TCP. Each peer gets one outgoing
// connection, opened only to the address the node was given for it and
// re-opened with backoff after a failure, fed from a bounded queue. Inbound
// connections deliver to the node.
//
// On a connection: a hello (tcpMagic, from and to node ids, 8 bytes each,
// big-endian, then the sender's incarnation as one length byte and up to
// maxIncarnation bytes), then frames of a uint32 big-endian length and a
// marshalled raftpb.Message. A hello addressed to another node id closes
// the connection.
type TCPTransport struct {
	cfg TCPConfig
	ln  net.Listener
	log *slog.Logger

	// Set by start, before any goroutine runs.
	self  uint64
	inc   string
	h     handler
	spawn func(func())
	done  chan struct{}

	mu      sync.Mutex // guards the fields below
	started bool
	closed  bool
	peers   map[uint64]*tcpPeer
	addrs   map[uint64]string // peers given before start
	conns   map[net.Conn]struct{}

	lastWarn atomic.Int64 // unix nanoseconds of the last TLS failure logged
}

var tcpMagic = [4]byte{'S', 'R', 'F', '2'}

const (
	tcpHelloLen    = 4 + 8 + 8 + 1 // and the incarnation's bytes
	maxIncarnation = 64
	// maxFrame bounds an inbound message (a snapshot can be large).
	maxFrame = 256 << 20
)

// NewTCPTransport listens on cfg.Listen at once, so that Addr is known
// before the nodes are configured.
func NewTCPTransport(cfg TCPConfig) (*TCPTransport, error) {
	if cfg.QueueSize <= 0 {
		cfg.QueueSize = 1024
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = time.Second
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = time.Second
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 5 * time.Second
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, err
	}
	if cfg.TLS != nil {
		ln = tls.NewListener(ln, cfg.TLS)
	}
	return &TCPTransport{
		cfg:   cfg,
		ln:    ln,
		log:   log.With("component", "raft-transport"),
		done:  make(chan struct{}),
		peers: map[uint64]*tcpPeer{},
		addrs: map[uint64]string{},
		conns: map[net.Conn]struct{}{},
	}, nil
}

// Addr returns the address the transport listens on.
func (t *TCPTransport) Addr() string { return t.ln.Addr().String() }

func (t *TCPTransport) start(self uint64, incarnation string, h handler, spawn func(func())) error {
	if len(incarnation) > maxIncarnation {
		return errors.New("cluster/raft: incarnation longer than 64 bytes")
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.started || t.closed {
		return errors.New("cluster/raft: TCP transport already started or closed")
	}
	t.self, t.inc, t.h, t.spawn, t.started = self, incarnation, h, spawn, true
	spawn(t.accept)
	for id, addr := range t.addrs {
		t.startPeerLocked(id, addr)
	}
	t.addrs = nil
	return nil
}

func (t *TCPTransport) addPeer(id uint64, addr string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.closed || id == t.self && t.started:
		return
	case !t.started:
		t.addrs[id] = addr
		return
	}
	if p := t.peers[id]; p != nil {
		if p.addr == addr {
			return
		}
		p.stop()
	}
	t.startPeerLocked(id, addr)
}

// startPeerLocked starts the sender of one peer. t.mu must be held.
func (t *TCPTransport) startPeerLocked(id uint64, addr string) {
	ctx, cancel := context.WithCancel(context.Background())
	p := &tcpPeer{t: t, id: id, addr: addr, q: make(chan tcpFrame, t.cfg.QueueSize), ctx: ctx, cancel: cancel, stopc: ctx.Done()}
	t.peers[id] = p
	t.spawn(p.run)
}

func (t *TCPTransport) removePeer(id uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if p := t.peers[id]; p != nil {
		p.stop()
		delete(t.peers, id)
	}
	delete(t.addrs, id)
}

func (t *TCPTransport) send(msgs []*pb.Message) {
	for _, m := range msgs {
		to := m.GetTo()
		t.mu.Lock()
		p := t.peers[to]
		t.mu.Unlock()
		snap := m.GetType() == pb.MsgSnap
		if p == nil {
			t.h.unreachable(to)
			if snap {
				t.h.snapshotStatus(to, true)
			}
			continue
		}
		b, err := proto.Marshal(m)
		if err != nil {
			panic(err) // Raft's own messages always marshal
		}
		select {
		case p.q <- tcpFrame{b: b, snap: snap}:
		default:
			// A full queue: the peer is slow or gone. Raft resends.
			t.h.unreachable(to)
			if snap {
				t.h.snapshotStatus(to, true)
			}
		}
	}
}

func (t *TCPTransport) close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	if t.started {
		close(t.done)
	}
	for _, p := range t.peers {
		p.stop()
	}
	for c := range t.conns {
		c.Close()
	}
	t.mu.Unlock()
	err := t.ln.Close()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}

// accept serves inbound connections until the listener closes.
func (t *TCPTransport) accept() {
	for {
		c, err := t.ln.Accept()
		if err != nil {
			select {
			case <-t.done:
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			t.log.Warn("accept failed", "err", err)
			select {
			case <-time.After(50 * time.Millisecond):
			case <-t.done:
				return
			}
			continue
		}
		t.mu.Lock()
		if t.closed {
			t.mu.Unlock()
			c.Close()
			return
		}
		t.conns[c] = struct{}{}
		t.spawn(func() { t.serve(c) })
		t.mu.Unlock()
	}
}

// serve reads one inbound connection's frames and delivers them.
func (t *TCPTransport) serve(c net.Conn) {
	defer func() {
		c.Close()
		t.mu.Lock()
		delete(t.conns, c)
		t.mu.Unlock()
	}()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if tc, ok := c.(*tls.Conn); ok {
		if err := tc.Handshake(); err != nil {
			t.warnTLS("refusing a connection whose TLS handshake failed", "remote", c.RemoteAddr().String(), "err", err)
			return
		}
	}
	r := bufio.NewReaderSize(c, 64<<10)
	var hello [tcpHelloLen]byte
	if _, err := io.ReadFull(r, hello[:]); err != nil {
		return
	}
	from, to := binary.BigEndian.Uint64(hello[4:]), binary.BigEndian.Uint64(hello[12:])
	if [4]byte(hello[:4]) != tcpMagic || to != t.self || hello[20] > maxIncarnation {
		t.log.Warn("refusing a connection not meant for this node", "remote", c.RemoteAddr().String(), "from", t.h.logID(from), "to", t.h.logID(to))
		return
	}
	inc := make([]byte, hello[20])
	if _, err := io.ReadFull(r, inc); err != nil {
		return
	}
	incarnation := string(inc)
	_ = c.SetDeadline(time.Time{})
	var hdr [4]byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return
		}
		n := binary.BigEndian.Uint32(hdr[:])
		if n > maxFrame {
			t.log.Warn("closing a connection with an oversized frame", "from", t.h.logID(from), "bytes", n)
			return
		}
		b := make([]byte, n)
		if _, err := io.ReadFull(r, b); err != nil {
			return
		}
		m := &pb.Message{}
		if err := proto.Unmarshal(b, m); err != nil {
			t.log.Warn("closing a connection with a bad frame", "from", t.h.logID(from), "err", err)
			return
		}
		t.h.receive(m, incarnation)
	}
}

type tcpFrame struct {
	b    []byte
	snap bool
}

// tcpPeer owns the outgoing connection to one peer.
type tcpPeer struct {
	t    *TCPTransport
	id   uint64
	addr string
	q    chan tcpFrame
	// ctx ends when the peer stops; it cancels a dial in progress.
	ctx    context.Context
	cancel context.CancelFunc
	stopc  <-chan struct{} // ctx.Done()

	mu      sync.Mutex // guards conn, stopped
	conn    net.Conn
	stopped bool
}

// stop ends the peer's goroutine, closing its connection to unblock a
// write in progress.
func (p *tcpPeer) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return
	}
	p.stopped = true
	p.cancel()
	if p.conn != nil {
		p.conn.Close()
	}
}

func (p *tcpPeer) setConn(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return false
	}
	p.conn = c
	return true
}

// run connects, writes queued frames, and reconnects with backoff after a
// failure, until stopped.
func (p *tcpPeer) run() {
	const minBackoff = 20 * time.Millisecond
	backoff := minBackoff
	for {
		d := net.Dialer{Timeout: p.t.cfg.DialTimeout}
		c, err := d.DialContext(p.ctx, "tcp", p.addr)
		p.t.h.refused(p.id, errors.Is(err, syscall.ECONNREFUSED))
		if err == nil && p.t.cfg.DialTLS != nil {
			c, err = p.handshake(c)
		}
		if err == nil {
			if !p.setConn(c) {
				c.Close()
				return
			}
			if p.write(c) {
				backoff = minBackoff // the connection worked for a while
			}
			c.Close()
		}
		select {
		case <-p.stopc:
			return
		default:
		}
		p.t.h.unreachable(p.id)
		p.drop()
		select {
		case <-time.After(backoff):
		case <-p.stopc:
			return
		}
		backoff = min(2*backoff, p.t.cfg.MaxBackoff)
	}
}

// handshake makes c a TLS connection to the peer, within the dial timeout.
func (p *tcpPeer) handshake(c net.Conn) (net.Conn, error) {
	cfg := p.t.cfg.DialTLS
	if cfg.ServerName == "" {
		cfg = cfg.Clone()
		cfg.ServerName, _, _ = net.SplitHostPort(p.addr)
	}
	tc := tls.Client(c, cfg)
	ctx, cancel := context.WithTimeout(p.ctx, p.t.cfg.DialTimeout)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		c.Close()
		if p.ctx.Err() == nil {
			p.t.warnTLS("TLS handshake with a peer failed", "peer", p.t.h.logID(p.id), "addr", p.addr, "err", err)
		}
		return nil, err
	}
	return tc, nil
}

// warnTLS logs a TLS failure, one every 10 s at most: a peer retrying
// with a bad certificate, or a stranger, must not flood the log.
func (t *TCPTransport) warnTLS(msg string, args ...any) {
	now, last := time.Now().UnixNano(), t.lastWarn.Load()
	if now-last < int64(10*time.Second) || !t.lastWarn.CompareAndSwap(last, now) {
		return
	}
	t.log.Warn(msg, args...)
}

// drop empties the queue while the peer is unreachable, so it does not
// receive a burst of stale messages on reconnecting.
func (p *tcpPeer) drop() {
	for {
		select {
		case f := <-p.q:
			if f.snap {
				p.t.h.snapshotStatus(p.id, true)
			}
		default:
			return
		}
	}
}

// write sends the hello and then frames from the queue until a write fails
// or the peer stops. It reports whether any frame was written.
func (p *tcpPeer) write(c net.Conn) (wrote bool) {
	w := bufio.NewWriterSize(c, 64<<10)
	var hello [tcpHelloLen]byte
	copy(hello[:], tcpMagic[:])
	binary.BigEndian.PutUint64(hello[4:], p.t.self)
	binary.BigEndian.PutUint64(hello[12:], p.id)
	hello[20] = byte(len(p.t.inc))
	_ = c.SetWriteDeadline(time.Now().Add(p.t.cfg.WriteTimeout))
	if _, err := w.Write(hello[:]); err != nil {
		return false
	}
	if _, err := w.WriteString(p.t.inc); err != nil {
		return false
	}
	var snaps int // MsgSnap frames in the current batch
	for {
		var f tcpFrame
		select {
		case f = <-p.q:
		case <-p.stopc:
			return wrote
		}
		_ = c.SetWriteDeadline(time.Now().Add(p.t.cfg.WriteTimeout))
		for {
			var hdr [4]byte
			binary.BigEndian.PutUint32(hdr[:], uint32(len(f.b)))
			_, err := w.Write(hdr[:])
			if err == nil {
				_, err = w.Write(f.b)
			}
			if f.snap {
				snaps++
			}
			if err != nil {
				p.failSnaps(snaps)
				return wrote
			}
			// Batch what is already queued into one flush.
			more := false
			select {
			case f = <-p.q:
				more = true
			default:
			}
			if !more {
				break
			}
		}
		if err := w.Flush(); err != nil {
			p.failSnaps(snaps)
			return wrote
		}
		wrote = true
		for ; snaps > 0; snaps-- {
			p.t.h.snapshotStatus(p.id, false)
		}
	}
}

func (p *tcpPeer) failSnaps(n int) {
	for range n {
		p.t.h.snapshotStatus(p.id, true)
	}
}
