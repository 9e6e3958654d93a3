package peer

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"

	"github.com/strandlog/strand/internal/lockrank"
)

// ErrUnknownPeer: the broker is not registered, so it has no address.
var ErrUnknownPeer = errors.New("peer: unknown broker")

// maxResponseBytes bounds a peer's answer, so a confused peer cannot make
// this broker allocate without limit.
const maxResponseBytes = 256 << 20

// Resolver returns a broker's client listener address.
type Resolver func(node int32) (addr string, ok bool)

// Options say how a peer's listener is spoken to: over TLS with TLS (its
// ServerName, when empty, the host dialled), and authenticated by SASL
// once connected. The zero Options speak PLAINTEXT.
type Options struct {
	TLS  *tls.Config
	SASL sasl.Mechanism
}

// Client holds this broker's connections to its peers.
type Client struct {
	self    int32
	resolve Resolver
	format  *kmsg.RequestFormatter
	opts    Options

	mu     lockrank.Mutex[lockrank.Leaf]
	conns  map[int32]*conn
	closed bool
}

// ClientIDPrefix starts the client id of every request one broker makes of
// another, the broker's node id after it.
const ClientIDPrefix = "strand-broker-"

// New returns a client for broker self, finding peers through resolve,
// speaking PLAINTEXT.
func New(self int32, resolve Resolver) *Client { return NewWith(self, resolve, Options{}) }

// NewWith returns a client for broker self that speaks to peers as opts say.
func NewWith(self int32, resolve Resolver, opts Options) *Client {
	return &Client{self: self, resolve: resolve, conns: map[int32]*conn{}, opts: opts,
		format: kmsg.NewRequestFormatter(kmsg.FormatterClientID(fmt.Sprintf("%s%d", ClientIDPrefix, self)))}
}

// Request sends req (at the version it is set to) to broker node and
// returns the answer, or an error once ctx ends.
func (c *Client) Request(ctx context.Context, node int32, req kmsg.Request) (kmsg.Response, error) {
	addr, ok := c.resolve(node)
	if !ok {
		return nil, fmt.Errorf("%w: %d", ErrUnknownPeer, node)
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, net.ErrClosed
	}
	cn := c.conns[node]
	if cn == nil {
		cn = &conn{}
		c.conns[node] = cn
	}
	c.mu.Unlock()
	return cn.request(ctx, addr, c.format, c.opts, req)
}

// Close closes every connection; requests after it fail.
func (c *Client) Close() error {
	c.mu.Lock()
	c.closed = true
	conns := c.conns
	c.conns = map[int32]*conn{}
	c.mu.Unlock()
	for _, cn := range conns {
		cn.mu.Lock()
		cn.drop()
		cn.mu.Unlock()
	}
	return nil
}

// conn is one connection to a peer, dialled on demand.
type conn struct {
	mu      lockrank.Mutex[lockrank.Leaf]
	nc      net.Conn
	rd      *bufio.Reader
	addr    string
	corr    int32
	backoff time.Duration
	retryAt time.Time // no dial before this, after a failure
	// redialAt is when an authenticated connection is dialled again,
	// before the peer's session lifetime ends (KIP-368); zero for never.
	redialAt time.Time
}

func (cn *conn) drop() {
	if cn.nc != nil {
		cn.nc.Close()
		cn.nc, cn.rd = nil, nil
	}
}

func (cn *conn) fail(err error) error {
	cn.drop()
	cn.backoff = min(max(2*cn.backoff, 20*time.Millisecond), time.Second)
	cn.retryAt = time.Now().Add(cn.backoff)
	return err
}

func (cn *conn) request(ctx context.Context, addr string, f *kmsg.RequestFormatter, opts Options, req kmsg.Request) (kmsg.Response, error) {
	// The lock is taken in a way ctx can interrupt.
	locked := make(chan struct{})
	go func() { cn.mu.Lock(); close(locked) }()
	select {
	case <-locked:
	case <-ctx.Done():
		go func() { <-locked; cn.mu.Unlock() }()
		return nil, ctx.Err()
	}
	defer cn.mu.Unlock()

	if cn.nc != nil && (cn.addr != addr || !cn.redialAt.IsZero() && time.Now().After(cn.redialAt)) {
		cn.drop() // the peer moved, or its session is about to end
	}
	if cn.nc == nil {
		if wait := time.Until(cn.retryAt); wait > 0 {
			select {
			case <-time.After(wait):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		if err := cn.dial(ctx, addr, f, opts); err != nil {
			return nil, cn.fail(err)
		}
	}
	resp, err := cn.roundTrip(ctx, f, req)
	if err != nil {
		return nil, cn.fail(err)
	}
	cn.backoff = 0
	return resp, nil
}

// dial connects to addr, over TLS and authenticated as opts say.
func (cn *conn) dial(ctx context.Context, addr string, f *kmsg.RequestFormatter, opts Options) error {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	host, _, _ := net.SplitHostPort(addr)
	if opts.TLS != nil {
		tc := opts.TLS.Clone()
		if tc.ServerName == "" {
			tc.ServerName = host
		}
		tlsConn := tls.Client(nc, tc)
		if err := tlsConn.HandshakeContext(ctx); err != nil {
			nc.Close()
			return fmt.Errorf("peer: TLS handshake with %s: %w", addr, err)
		}
		nc = tlsConn
	}
	cn.nc, cn.rd, cn.addr, cn.redialAt = nc, bufio.NewReader(nc), addr, time.Time{}
	if opts.SASL != nil {
		if err := cn.authenticate(ctx, host, f, opts.SASL); err != nil {
			cn.drop()
			return fmt.Errorf("peer: authenticating to %s with %s: %w", addr, opts.SASL.Name(), err)
		}
	}
	return nil
}

// authenticate runs a SASL exchange (SaslHandshake, then SaslAuthenticate
// until the mechanism is done) on a new connection.
func (cn *conn) authenticate(ctx context.Context, host string, f *kmsg.RequestFormatter, m sasl.Mechanism) error {
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.SetVersion(1)
	hs.Mechanism = m.Name()
	resp, err := cn.roundTrip(ctx, f, hs)
	if err != nil {
		return err
	}
	if err := kerr.ErrorForCode(resp.(*kmsg.SASLHandshakeResponse).ErrorCode); err != nil {
		return err
	}
	session, out, err := m.Authenticate(ctx, host)
	if err != nil {
		return err
	}
	for {
		auth := kmsg.NewPtrSASLAuthenticateRequest()
		auth.SetVersion(1)
		auth.SASLAuthBytes = out
		resp, err := cn.roundTrip(ctx, f, auth)
		if err != nil {
			return err
		}
		ar := resp.(*kmsg.SASLAuthenticateResponse)
		if err := kerr.ErrorForCode(ar.ErrorCode); err != nil {
			if ar.ErrorMessage != nil {
				return fmt.Errorf("%w: %s", err, *ar.ErrorMessage)
			}
			return err
		}
		done, next, err := session.Challenge(ar.SASLAuthBytes)
		if err != nil {
			return err
		}
		if done {
			if life := time.Duration(ar.SessionLifetimeMillis) * time.Millisecond; life > 0 {
				// Dialled again well before the session ends, as Kafka's
				// clients re-authenticate at 85-95% of it.
				cn.redialAt = time.Now().Add(life * 8 / 10)
			}
			return nil
		}
		out = next
	}
}

// roundTrip sends req on the connection and reads its answer.
func (cn *conn) roundTrip(ctx context.Context, f *kmsg.RequestFormatter, req kmsg.Request) (kmsg.Response, error) {
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(30 * time.Second)
	}
	cn.nc.SetDeadline(deadline)
	cn.corr++
	corr := cn.corr
	if _, err := cn.nc.Write(f.AppendRequest(nil, req, corr)); err != nil {
		return nil, err
	}
	return cn.readResponse(req, corr)
}

func (cn *conn) readResponse(req kmsg.Request, corr int32) (kmsg.Response, error) {
	var size [4]byte
	if _, err := io.ReadFull(cn.rd, size[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(size[:])
	if n < 4 || n > maxResponseBytes {
		return nil, fmt.Errorf("peer: response of %d bytes", n)
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(cn.rd, buf); err != nil {
		return nil, err
	}
	if got := int32(binary.BigEndian.Uint32(buf)); got != corr {
		return nil, fmt.Errorf("peer: response to request %d, want %d", got, corr)
	}
	body := buf[4:]
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if resp.IsFlexible() && req.Key() != 18 { // ApiVersions answers keep the old header
		rd := kbin.Reader{Src: body}
		kmsg.SkipTags(&rd)
		if err := rd.Complete(); err != nil {
			return nil, fmt.Errorf("peer: bad response header tags: %w", err)
		}
		body = rd.Src
	}
	if err := resp.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("peer: decoding %s: %w", kmsg.NameForKey(req.Key()), err)
	}
	return resp, nil
}
