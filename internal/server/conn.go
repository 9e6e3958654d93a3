package server

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"os"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/acl"
	"github.com/strandlog/strand/internal/peer"
	"github.com/strandlog/strand/internal/protocol"
	"github.com/strandlog/strand/internal/quota"
	"github.com/strandlog/strand/internal/replica"
)

// maxInFlight bounds the requests read ahead of their responses on one
// connection (clients send up to 5; admin tools a few more).
const maxInFlight = 64

type conn struct {
	srv    *Server
	nc     net.Conn
	remote string
	logger *slog.Logger
	queue  chan pending // answers in request order
	// clientID is the client id the group coordinator knows this
	// connection by (identified: it has been told), for its disconnect
	// grace.
	clientID   string
	identified bool
	software   protocol.Software // from the connection's ApiVersions
	// budget bounds this connection's bytes of requests not yet answered.
	budget *byteBudget
	// sasl is the authentication of a SASL listener's connection; nil on
	// other listeners.
	sasl *saslConn
	// certPrincipal is the principal of the client's TLS certificate
	// (User: and its subject, as Kafka's default principal builder names
	// it); empty without one. host is the client's address, for ACLs.
	certPrincipal string
	host          string
	listener      string // the name of the listener it came through
	// mutedUntil is when the client's throttle ends (unix nanoseconds):
	// until then nothing more is read from it (KIP-219).
	mutedUntil atomic.Int64
}

// principal is who the connection's requests come from: its SASL user,
// else its certificate's subject, else ANONYMOUS.
func (c *conn) principal() string {
	switch {
	case c.sasl != nil && c.sasl.done:
		return "User:" + c.sasl.user
	case c.certPrincipal != "":
		return c.certPrincipal
	}
	return acl.Anonymous
}

type pending struct {
	req   *protocol.Request
	resp  *protocol.Response
	err   error
	read  time.Time // when the request was read, for its latency
	bytes int64     // the frame's size, given back once it is answered
	raw   []byte    // a raw SASL token to send as a frame of its own (req is nil)
	frame *[]byte   // a produce request's frame, reused once it is answered
}

// giveBack returns a frame's bytes to the connection's and the broker's
// budgets.
func (c *conn) giveBack(n int64) {
	c.budget.release(n)
	c.srv.requestBytes.release(n)
}

func (s *Server) serveConn(ctx context.Context, nc net.Conn, l *listener) {
	c := &conn{srv: s, nc: nc, remote: nc.RemoteAddr().String(), queue: make(chan pending, maxInFlight),
		budget: newByteBudget(int64(s.cfg.MaxRequestBytes)), listener: l.cfg.Name}
	if l.cfg.SASL() {
		c.sasl = &saslConn{mechanisms: s.cfg.SASLMechanisms}
	}
	c.logger = s.logger.With("client", c.remote)
	if tc, ok := nc.(*tls.Conn); ok {
		tc.SetDeadline(time.Now().Add(tlsHandshakeTimeout))
		if err := tc.HandshakeContext(ctx); err != nil {
			if ctx.Err() == nil {
				c.warn("", protocol.Software{}, "closing connection: TLS handshake failed", "err", err)
			}
			nc.Close()
			return
		}
		tc.SetDeadline(time.Time{})
		if certs := tc.ConnectionState().PeerCertificates; len(certs) > 0 {
			c.certPrincipal = "User:" + certs[0].Subject.String()
		}
	}
	c.host = c.remote
	if h, _, err := net.SplitHostPort(c.remote); err == nil {
		c.host = h
	}
	// The writer's context also ends when the reader stops (the client
	// went away or sent something we close on), so that its parked long
	// polls answer at once instead of holding the connection open for up
	// to their MaxWait.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	writerDone := make(chan struct{})
	s.goroutines.Go(func() {
		defer close(writerDone)
		c.writeLoop(wctx)
	})
	c.readLoop(ctx)
	s.groups.ClientDisconnected(c.remote)
	s.links.ClientDisconnected(c.remote)
	s.broker.ShareClientDisconnected(c.remote)
	close(c.queue)
	cancel()
	<-writerDone
	nc.Close()
}

// readLoop reads, decodes and dispatches requests until the client goes
// away, sends something we close on, or the server shuts down.
func (c *conn) readLoop(ctx context.Context) {
	r := bufio.NewReaderSize(c.nc, 64<<10)
	var sizeBuf [4]byte
	idle := c.srv.cfg.ConnectionsMaxIdle
	for {
		if until := c.mutedUntil.Load(); until > 0 {
			// Throttled: the client waits too, and what it sends
			// meanwhile stays in the socket.
			if d := time.Until(time.Unix(0, until)); d > 0 {
				select {
				case <-time.After(d):
				case <-ctx.Done():
					return
				}
			}
		}
		if idle > 0 {
			// A client that sends nothing, or a frame too slowly, for
			// connections.max.idle.ms is closed.
			c.nc.SetReadDeadline(time.Now().Add(idle))
			if ctx.Err() != nil {
				// Shutting down: its deadline, now, must stand.
				c.nc.SetReadDeadline(time.Now())
			}
		}
		if _, err := io.ReadFull(r, sizeBuf[:]); err != nil {
			var ne net.Error
			switch {
			case errors.As(err, &ne) && ne.Timeout():
				c.logger.Debug("closing an idle connection", "idle", idle)
			case !errors.Is(err, io.EOF) && ctx.Err() == nil && !errors.Is(err, net.ErrClosed):
				c.warn(c.clientID, c.software, "connection read failed", "err", err)
			}
			return
		}
		size := int32(binary.BigEndian.Uint32(sizeBuf[:]))
		max := c.srv.cfg.MaxRequestBytes
		if c.sasl != nil && !c.sasl.done {
			max = min(max, saslMaxReceive) // before authentication
		}
		if size < 8 || size > max {
			c.warn(c.clientID, c.software, "closing connection: request size out of range", "size", size, "max", max)
			return
		}
		// Room for the frame, on this connection and in the broker,
		// before it is allocated; given back once it is answered.
		n := int64(size)
		if !c.budget.acquire(ctx, n) {
			return
		}
		if !c.srv.requestBytes.acquire(ctx, n) {
			c.budget.release(n)
			return
		}
		var reused *[]byte // a pooled frame, for a large produce request
		if key, err := r.Peek(2); err == nil && binary.BigEndian.Uint16(key) == 0 {
			reused = produceFrame(int(size))
		}
		var frame []byte
		if reused != nil {
			frame = *reused
		} else {
			frame = make([]byte, size)
		}
		if _, err := io.ReadFull(r, frame); err != nil {
			c.giveBack(n)
			c.warn(c.clientID, c.software, "connection closed mid-request", "size", size, "err", err)
			return
		}
		if c.sasl != nil && c.sasl.raw && !c.sasl.done {
			// A raw SASL token, after a v0 handshake.
			answer, code, _ := c.stepSASL(c.clientID, c.software, frame)
			if code != 0 {
				c.giveBack(n)
				return
			}
			c.queue <- pending{raw: answer, bytes: n}
			continue
		}
		var read time.Time // only read the clock for the latency metric
		if c.srv.metrics != nil {
			read = time.Now()
		}
		req, resp, err := decodeRequest(frame)
		if err != nil {
			c.giveBack(n)
			c.warn(c.clientID, c.software, "closing connection: bad request", "err", err)
			return
		}
		req.Client, req.Host, req.Size, req.Listener = c.remote, c.host, int(size), c.listener
		if av, ok := req.Body.(*kmsg.ApiVersionsRequest); ok && av.Version >= 3 {
			c.software = protocol.Software{Name: av.ClientSoftwareName, Version: av.ClientSoftwareVersion}
		}
		req.Software = c.software
		if !c.identified || req.ClientID != c.clientID {
			c.srv.groups.ClientConnected(c.remote, req.ClientID)
			c.clientID, c.identified = req.ClientID, true
			if strings.HasPrefix(req.ClientID, peer.ClientIDPrefix) {
				// Another broker's connection is used when it needs it
				// (a marker, a forwarded request): it is not idle.
				idle = 0
				c.nc.SetReadDeadline(time.Time{})
			}
		}
		if c.sasl != nil && c.sasl.done {
			switch {
			case req.Key == 17 && c.srv.cfg.ConnectionsMaxReauth > 0:
				c.sasl.beginReauth()
			case c.sasl.expired(time.Now()):
				c.giveBack(n)
				c.warn(req.ClientID, req.Software, "closing connection: its SASL authentication expired", "api", kmsg.NameForKey(req.Key),
					"principal", "User:"+c.sasl.user)
				return
			}
		}
		if c.sasl != nil && !c.sasl.done && req.Key != 18 {
			if req.Key != 17 && req.Key != 36 {
				c.giveBack(n)
				c.warn(req.ClientID, req.Software, "closing connection: a request before SASL authentication", "api", kmsg.NameForKey(req.Key))
				return
			}
			resp, closing := c.answerSASL(req)
			c.queue <- pending{req: req, resp: resp, read: read, bytes: n}
			if closing {
				return
			}
			continue
		}
		if resp == nil {
			req.Principal = c.principal()
			quotas := c.srv.broker.Quotas.Active()
			var began time.Time
			if quotas {
				began = time.Now()
			}
			resp, err = c.handle(ctx, req)
			if quotas && resp != nil && resp.Body != nil {
				// The request-time quota counts the handler's own time.
				protocol.SetThrottle(resp.Body, c.srv.broker.Quotas.Record(quota.Request, req.QuotaUser(),
					req.ClientID, float64(time.Since(began)), time.Now()))
				// A throttle known now (a produce's) holds the reading
				// from now, not from when the answer is written.
				c.muteFor(resp.Body)
			}
		}
		// Always queued, even while shutting down: the request has taken
		// effect (a write may be stored), so its answer must go out. The
		// writer drains the queue until it is closed, so this cannot block
		// for ever.
		c.queue <- pending{req: req, resp: resp, err: err, read: read, bytes: n, frame: reused}
		if err != nil {
			return
		}
	}
}

// decodeRequest parses a frame's header and body. For an ApiVersions
// request of a version we do not serve it returns the answer directly. It
// keeps no state, so the fuzz test calls it with arbitrary frames.
func decodeRequest(frame []byte) (*protocol.Request, *protocol.Response, error) {
	rd := kbin.Reader{Src: frame}
	key, version, corr := rd.Int16(), rd.Int16(), rd.Int32()
	clientID := rd.NullableString()
	if err := rd.Complete(); err != nil {
		return nil, nil, fmt.Errorf("short request header")
	}
	req := &protocol.Request{Key: key, Version: version, Correlation: corr}
	if clientID != nil {
		req.ClientID = *clientID
	}
	body := kmsg.RequestForKey(key)
	if body == nil || !protocol.Known(key) {
		return nil, nil, fmt.Errorf("unknown API key %d (client id %q)", key, req.ClientID)
	}
	if !protocol.Supported(key, version) {
		if key == 18 { // KIP-511: answer in v0 so the client can retry
			body.SetVersion(0)
			req.Body = body
			return req, &protocol.Response{Body: protocol.UnsupportedApiVersions()}, nil
		}
		return nil, nil, fmt.Errorf("unsupported version %d of %s (client id %q)", version, kmsg.NameForKey(key), req.ClientID)
	}
	body.SetVersion(version)
	if body.IsFlexible() {
		kmsg.SkipTags(&rd)
		if err := rd.Complete(); err != nil {
			return nil, nil, fmt.Errorf("%s v%d: bad request header tags (client id %q)", kmsg.NameForKey(key), version, req.ClientID)
		}
	}
	if err := body.ReadFrom(rd.Src); err != nil {
		return nil, nil, fmt.Errorf("decoding %s v%d (client id %q): %v", kmsg.NameForKey(key), version, req.ClientID, err)
	}
	req.Body = body
	return req, nil, nil
}

// handle runs a handler's synchronous part. A handler that panics fails its
// request (the connection closes, as for any handler error) instead of
// taking the whole broker down with it.
func (c *conn) handle(ctx context.Context, req *protocol.Request) (resp *protocol.Response, err error) {
	defer func() {
		if r := recover(); r != nil {
			c.logger.Error("handler panicked", "api", kmsg.NameForKey(req.Key), "version", req.Version,
				"panic", r, "stack", string(debug.Stack()))
			resp, err = nil, fmt.Errorf("internal error in %s handler: %v", kmsg.NameForKey(req.Key), r)
		}
	}()
	return c.srv.broker.Handle(ctx, req)
}

// finish runs a response's deferred part, recovering from a panic as handle
// does.
func (c *conn) finish(ctx context.Context, req *protocol.Request, resp *protocol.Response) (out *protocol.Response, err error) {
	defer func() {
		if r := recover(); r != nil {
			c.logger.Error("handler panicked", "api", kmsg.NameForKey(req.Key), "version", req.Version,
				"panic", r, "stack", string(debug.Stack()))
			out, err = nil, fmt.Errorf("internal error in %s handler: %v", kmsg.NameForKey(req.Key), r)
		}
	}()
	return resp.Defer(ctx)
}

// writeLoop writes the answers in request order.
func (c *conn) writeLoop(ctx context.Context) {
	w := &answerer{c: c}
	for p := range c.queue {
		w.answer(ctx, p)
		c.giveBack(p.bytes)
		if p.frame != nil {
			putFrame(p.frame)
		}
	}
}

// answerer writes a connection's answers; after a failure it drops the
// rest, and the connection closes.
type answerer struct {
	c      *conn
	failed bool
	buf    []byte
}

func (w *answerer) answer(ctx context.Context, p pending) {
	c := w.c
	if p.req == nil {
		if w.failed {
			return
		}
		frame := binary.BigEndian.AppendUint32(nil, uint32(len(p.raw)))
		if _, err := c.nc.Write(append(frame, p.raw...)); err != nil {
			w.fail()
		}
		return
	}
	if w.failed || p.err != nil {
		if p.err != nil && !w.failed {
			c.warn(p.req.ClientID, p.req.Software, "closing connection: request failed", "api", kmsg.NameForKey(p.req.Key), "err", p.err)
		}
		w.fail()
		return
	}
	resp := p.resp
	if resp.Defer != nil {
		var err error
		if resp, err = c.finish(ctx, p.req, resp); err != nil {
			c.warn(p.req.ClientID, p.req.Software, "closing connection: request failed", "api", kmsg.NameForKey(p.req.Key), "err", err)
			w.fail()
			return
		}
	}
	if resp == nil || resp.Body == nil {
		c.served(p, nil)
		return // acks=0
	}
	var err error
	if w.buf, err = c.write(w.buf[:0], p.req, resp); err != nil {
		c.warn(p.req.ClientID, p.req.Software, "connection write failed", "api", kmsg.NameForKey(p.req.Key), "err", err)
		w.fail()
		return
	}
	c.muteFor(resp.Body)
	c.served(p, resp.Body)
}

// muteFor holds the reading for the answer's throttle time, if it has one
// and it ends later than the hold already set.
func (c *conn) muteFor(body kmsg.Response) {
	tr, ok := body.(kmsg.ThrottleResponse)
	if !ok {
		return
	}
	if ms, _ := tr.Throttle(); ms > 0 {
		until := time.Now().Add(time.Duration(ms) * time.Millisecond).UnixNano()
		for {
			cur := c.mutedUntil.Load()
			if cur >= until || c.mutedUntil.CompareAndSwap(cur, until) {
				return
			}
		}
	}
}

// fail closes the connection, which unblocks its reader.
func (w *answerer) fail() {
	w.failed = true
	w.c.nc.Close()
}

// served counts an answered request in the metrics: its latency and the
// errors its answer holds.
func (c *conn) served(p pending, body kmsg.Response) {
	if m := c.srv.metrics; m != nil {
		m.Answered(p.req.Key, time.Since(p.read), body)
	}
}

func (c *conn) write(buf []byte, req *protocol.Request, resp *protocol.Response) ([]byte, error) {
	buf, chunks, err := encodeResponse(buf, req, resp)
	if err != nil {
		return buf, err
	}
	for _, ch := range chunks {
		if len(ch.Bytes) > 0 {
			if _, err := c.nc.Write(ch.Bytes); err != nil {
				return buf, err
			}
		}
		if ch.Section.Size > 0 {
			if err := sendSection(c.nc, ch.Section); err != nil {
				return buf, err
			}
		}
	}
	return buf, nil
}

// sectionBuffers carry sections that are copied rather than sent with
// sendfile: over TLS, and the newest batches of a log, still in memory.
var sectionBuffers = sync.Pool{New: func() any { return new([64 << 10]byte) }}

// copySection writes sec to w through a pooled buffer. A file shorter than
// the section is an error: the frame's size already counts every byte.
func copySection(w io.Writer, sec replica.Section) error {
	buf := sectionBuffers.Get().(*[64 << 10]byte)
	defer sectionBuffers.Put(buf)
	for off, remain := sec.Pos, sec.Size; remain > 0; {
		n := int(min(remain, int64(len(buf))))
		if got, err := sec.File.ReadAt(buf[:n], off); got < n {
			if err == nil || errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
		if _, err := w.Write(buf[:n]); err != nil {
			return err
		}
		off += int64(n)
		remain -= int64(n)
	}
	return nil
}

// encodeResponse appends resp's frame to buf and cuts it into the chunks to
// send: encoded bytes and stored sections, the frame's size prefix covering
// both. It returns buf for reuse.
func encodeResponse(buf []byte, req *protocol.Request, resp *protocol.Response) ([]byte, []protocol.Chunk, error) {
	resp.Body.SetVersion(req.Body.GetVersion())
	buf = append(buf, 0, 0, 0, 0)
	buf = binary.BigEndian.AppendUint32(buf, uint32(req.Correlation))
	// ApiVersions answers with header v0 at every version, so that a client
	// that does not yet know our versions can read it.
	if resp.Body.IsFlexible() && req.Key != 18 {
		buf = append(buf, 0)
	}
	buf = resp.Body.AppendTo(buf)
	chunks, err := protocol.Chunks(buf, resp.Body.IsFlexible(), resp.Splices)
	if err != nil {
		return buf, nil, err
	}
	total := int64(-4)
	for _, ch := range chunks {
		total += int64(len(ch.Bytes)) + ch.Section.Size
	}
	if total > math.MaxInt32 {
		// The size prefix cannot say it; a wrapped one would desynchronise
		// the client's stream.
		return buf, nil, fmt.Errorf("response of %d bytes is too large to frame", total)
	}
	binary.BigEndian.PutUint32(chunks[0].Bytes[:4], uint32(total))
	return buf, chunks, nil
}

// sendSection sends stored bytes to the client: with sendfile from the
// segment file when both ends allow it, by copying otherwise.
func sendSection(nc net.Conn, sec replica.Section) error {
	f, isFile := sec.File.(*os.File)
	tc, isTCP := nc.(*net.TCPConn)
	if !isFile || !isTCP {
		return copySection(nc, sec)
	}
	src, err := f.SyscallConn()
	if err != nil {
		return err
	}
	dst, err := tc.SyscallConn()
	if err != nil {
		return err
	}
	off, remain := sec.Pos, sec.Size
	var sendErr, writeErr error
	ctlErr := src.Control(func(sfd uintptr) {
		writeErr = dst.Write(func(dfd uintptr) bool {
			for remain > 0 {
				n, err := syscall.Sendfile(int(dfd), int(sfd), &off, int(min(remain, 1<<30)))
				if n > 0 {
					remain -= int64(n)
				}
				switch {
				case errors.Is(err, syscall.EAGAIN):
					return false // wait until writable
				case errors.Is(err, syscall.EINTR):
					continue
				case err != nil:
					sendErr = err
					return true
				case n == 0:
					sendErr = io.ErrUnexpectedEOF // the file is shorter than the section
					return true
				}
			}
			return true
		})
	})
	return errors.Join(ctlErr, writeErr, sendErr)
}
