package server_test

import (
	"context"
	"crypto/tls"
	"net"
	"os"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandlog/strand/internal/config"
	"github.com/strandlog/strand/internal/testutil"
)

// sslBroker starts a broker whose client listener is SSL.
func sslBroker(t *testing.T, files *testutil.TLSFiles, edit func(*config.Broker)) *testutil.Broker {
	return testutil.StartBroker(t, func(c *config.Broker) {
		c.ListenerProtocol, c.SSLKeystore, c.SSLKey = "SSL", files.ServerCert, files.ServerKey
		if edit != nil {
			edit(c)
		}
	})
}

// tlsClient pings the broker over TLS with tc; the error is the client's.
func tlsPing(t *testing.T, addr string, tc *tls.Config) error {
	t.Helper()
	opts := []kgo.Opt{kgo.SeedBrokers(addr), kgo.RequestRetries(0), kgo.RetryTimeout(time.Second)}
	if tc != nil {
		opts = append(opts, kgo.DialTLSConfig(tc))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return cl.Ping(ctx)
}

// TestSSLListener: clients that trust the broker's CA produce and consume
// over TLS; a plain TCP client, a client trusting another CA and, with
// mutual TLS required, a client without a certificate are refused.
func TestSSLListener(t *testing.T) {
	files := testutil.NewTLSFiles(t)
	b := sslBroker(t, files, nil)
	tc := files.ClientConfig(t, files.CA, false)
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.DialTLSConfig(tc), kgo.DefaultProduceTopic("secure"),
		kgo.ConsumeTopics("secure"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, "secure"); err != nil {
		t.Fatal(err)
	}
	for range 20 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: make([]byte, 10_000)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	for got := 0; got < 20; {
		fs := cl.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatal(err)
		}
		got += fs.NumRecords()
	}
	if err := tlsPing(t, b.Addr, nil); err == nil {
		t.Error("a plain TCP client was served by the SSL listener")
	}
	if err := tlsPing(t, b.Addr, files.ClientConfig(t, files.OtherCA, false)); err == nil {
		t.Error("a client trusting another CA accepted the broker's certificate")
	}

	mtls := sslBroker(t, files, func(c *config.Broker) { c.SSLClientAuth, c.SSLTruststore = "required", files.CA })
	if err := tlsPing(t, mtls.Addr, files.ClientConfig(t, files.CA, false)); err == nil {
		t.Error("mutual TLS required, yet a client without a certificate was served")
	}
	if err := tlsPing(t, mtls.Addr, files.ClientConfig(t, files.CA, true)); err != nil {
		t.Errorf("a client with its certificate: %v", err)
	}
}

// TestSSLCertificateReload: a renewed certificate written over the files
// is served to new connections without a restart.
func TestSSLCertificateReload(t *testing.T) {
	files := testutil.NewTLSFiles(t)
	b := sslBroker(t, files, nil)
	serial := func() string {
		t.Helper()
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", b.Addr, files.ClientConfig(t, files.CA, false))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].SerialNumber.String()
	}
	before := serial()
	cert, key := files.Issue(t, "renewed", "127.0.0.1 renewed", true)
	for _, f := range [][2]string{{cert, files.ServerCert}, {key, files.ServerKey}} {
		b, err := os.ReadFile(f[0])
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f[1], b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(10 * time.Second); serial() == before; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the renewed certificate is not served")
		}
	}
}

// BenchmarkTLS compares the client listener over TLS with plain TCP in one
// run: 10 KiB records (the bench suite's workload (b)) produced and
// consumed, and a connection's TLS handshake. Over TLS fetches are copied
// through the process instead of sent with sendfile.
func BenchmarkTLS(b *testing.B) {
	files := testutil.NewTLSFiles(b)
	for _, secure := range []bool{false, true} {
		name := map[bool]string{false: "plain", true: "tls"}[secure]
		var opts []kgo.Opt
		start := func(b *testing.B) *testutil.Broker { return testutil.StartBroker(b, nil) }
		if secure {
			opts = append(opts, kgo.DialTLSConfig(files.ClientConfig(b, files.CA, false)))
			start = func(b *testing.B) *testutil.Broker {
				return testutil.StartBroker(b, func(c *config.Broker) {
					c.ListenerProtocol, c.SSLKeystore, c.SSLKey = "SSL", files.ServerCert, files.ServerKey
				})
			}
		}
		b.Run(name+"/produce-consume-10KiB", func(b *testing.B) {
			br := start(b)
			ctx := context.Background()
			cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(br.Addr), kgo.DefaultProduceTopic("bench"),
				kgo.ProducerLinger(5 * time.Millisecond)}, opts...)...)
			if err != nil {
				b.Fatal(err)
			}
			defer cl.Close()
			if _, err := kadm.NewClient(cl).CreateTopic(ctx, 6, 1, nil, "bench"); err != nil {
				b.Fatal(err)
			}
			value := make([]byte, 10<<10)
			b.SetBytes(2 * int64(len(value))) // written once, read once
			b.ResetTimer()
			for range b.N {
				cl.Produce(ctx, &kgo.Record{Value: value}, nil)
			}
			if err := cl.Flush(ctx); err != nil {
				b.Fatal(err)
			}
			cons, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(br.Addr), kgo.ConsumeTopics("bench"),
				kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}, opts...)...)
			if err != nil {
				b.Fatal(err)
			}
			defer cons.Close()
			for got := 0; got < b.N; {
				fs := cons.PollFetches(ctx)
				if err := fs.Err(); err != nil {
					b.Fatal(err)
				}
				got += fs.NumRecords()
			}
		})
	}
	b.Run("tls/handshake", func(b *testing.B) {
		br := testutil.StartBroker(b, func(c *config.Broker) {
			c.ListenerProtocol, c.SSLKeystore, c.SSLKey = "SSL", files.ServerCert, files.ServerKey
		})
		tc := files.ClientConfig(b, files.CA, false)
		for range b.N {
			c, err := tls.Dial("tcp", br.Addr, tc)
			if err != nil {
				b.Fatal(err)
			}
			c.Close()
		}
	})
}
