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
