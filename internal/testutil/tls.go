package testutil

import (
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
	"testing"
	"time"
)

// TLSFiles are PEM files for TLS tests: a CA, a server certificate for
// 127.0.0.1 and localhost signed by it, a client certificate signed by it,
// and another CA that signed nothing of these.
type TLSFiles struct {
	CA, ServerCert, ServerKey, ClientCert, ClientKey, OtherCA string
	ca                                                        *x509.Certificate
	caKey                                                     *ecdsa.PrivateKey
	dir                                                       string
}

// NewTLSFiles writes a fresh set into a temporary directory.
func NewTLSFiles(t testing.TB) *TLSFiles {
	t.Helper()
	dir := t.TempDir()
	f := &TLSFiles{dir: dir}
	f.ca, f.caKey = newCA(t, "strand test CA")
	f.CA = writePEM(t, dir, "ca.pem", "CERTIFICATE", f.ca.Raw)
	other, _ := newCA(t, "another CA")
	f.OtherCA = writePEM(t, dir, "other-ca.pem", "CERTIFICATE", other.Raw)
	f.ServerCert, f.ServerKey = f.Issue(t, "server", "127.0.0.1 server", true)
	f.ClientCert, f.ClientKey = f.Issue(t, "client", "client-1", false)
	return f
}

// Issue writes a certificate for cn signed by the CA (a server's for
// 127.0.0.1 and localhost, good for client authentication too, or a
// client's) and its key, as name.pem and
// name-key.pem.
func (f *TLSFiles) Issue(t testing.TB, name, cn string, server bool) (cert, key string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature}
	if server {
		// A broker's certificate also identifies it to its peers.
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
		tmpl.DNSNames = []string{"localhost"}
	} else {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, f.ca, &k.PublicKey, f.caKey)
	if err != nil {
		t.Fatal(err)
	}
	kd, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return writePEM(t, f.dir, name+".pem", "CERTIFICATE", der), writePEM(t, f.dir, name+"-key.pem", "PRIVATE KEY", kd)
}

// ClientConfig is a client's TLS trusting roots (a PEM file), with the
// client certificate when withCert.
func (f *TLSFiles) ClientConfig(t testing.TB, roots string, withCert bool) *tls.Config {
	t.Helper()
	pool := x509.NewCertPool()
	b, err := os.ReadFile(roots)
	if err != nil || !pool.AppendCertsFromPEM(b) {
		t.Fatalf("reading %s: %v", roots, err)
	}
	c := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if withCert {
		cert, err := tls.LoadX509KeyPair(f.ClientCert, f.ClientKey)
		if err != nil {
			t.Fatal(err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c
}

func newCA(t testing.TB, cn string) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c, k
}

func writePEM(t testing.TB, dir, name, typ string, der []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
