package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The strand-tls kind serves its client listener over TLS with a
// certificate made for the run; the bench's clients dial it over TLS
// (fetches then copy instead of using sendfile), every other broker in
// plain TCP.

// tlsBrokers are the addresses served over TLS, with the client
// configuration that trusts their certificate.
var tlsBrokers sync.Map

// dialer is the bench clients' dialer: TLS to the brokers in tlsBrokers.
var dialer = kgo.Dialer(func(ctx context.Context, network, host string) (net.Conn, error) {
	d := &net.Dialer{Timeout: 10 * time.Second}
	if tc, ok := tlsBrokers.Load(host); ok {
		return (&tls.Dialer{NetDialer: d, Config: tc.(*tls.Config)}).DialContext(ctx, network, host)
	}
	return d.DialContext(ctx, network, host)
})

// writeCertificate writes a self-signed certificate for 127.0.0.1 and its
// key in dir, and returns their paths and a pool trusting it.
func writeCertificate(dir string) (cert, key string, pool *x509.CertPool, err error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "strand-bench"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(7 * 24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, BasicConstraintsValid: true, IsCA: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		return "", "", nil, err
	}
	kd, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return "", "", nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", nil, err
	}
	cert, key = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		return "", "", nil, err
	}
	if err := os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kd}), 0o600); err != nil {
		return "", "", nil, err
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		return "", "", nil, err
	}
	pool = x509.NewCertPool()
	pool.AddCert(c)
	return cert, key, pool, nil
}
