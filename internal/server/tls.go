package server

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/strandlog/strand/internal/config"
	"github.com/strandlog/strand/internal/lockrank"
)

// tlsHandshakeTimeout bounds a client's TLS handshake: a client that
// opens a connection and sends nothing holds it no longer.
const tlsHandshakeTimeout = 10 * time.Second

// certReloadEvery is how often the certificate files are looked at for a
// change, at most, on a handshake.
const certReloadEvery = time.Second

// tlsConfig is the SSL listener's TLS: 1.2 and 1.3, the certificate
// reloaded when its files change, and clients' certificates asked for as
// ssl.client.auth says.
func tlsConfig(cfg config.Broker, logger *slog.Logger) (*tls.Config, *certReloader, error) {
	keyFile := cfg.SSLKey
	if keyFile == "" {
		keyFile = cfg.SSLKeystore // one PEM file with both
	}
	r := &certReloader{certFile: cfg.SSLKeystore, keyFile: keyFile, logger: logger}
	if err := r.load(); err != nil {
		return nil, nil, err
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: r.get}
	switch cfg.SSLClientAuth {
	case "requested":
		tc.ClientAuth = tls.VerifyClientCertIfGiven
	case "required":
		tc.ClientAuth = tls.RequireAndVerifyClientCert
	}
	if cfg.SSLTruststore != "" {
		pem, err := os.ReadFile(cfg.SSLTruststore)
		if err != nil {
			return nil, nil, fmt.Errorf("ssl.truststore.location: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, nil, fmt.Errorf("ssl.truststore.location %s: no PEM certificates in it", cfg.SSLTruststore)
		}
		tc.ClientCAs = pool
	}
	return tc, r, nil
}

// certReloader serves the listener's certificate, reading its files again
// once they change, so that a renewed certificate is served without a
// restart.
type certReloader struct {
	certFile, keyFile string
	logger            *slog.Logger

	mu      lockrank.Mutex[lockrank.Leaf]
	cert    *tls.Certificate
	mod     time.Time // the files' latest modification when read
	checked time.Time
}

// load reads the certificate and key.
func (r *certReloader) load() error {
	mod, err := r.modified()
	if err != nil {
		return err
	}
	c, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		return fmt.Errorf("the SSL listener's certificate (%s, %s): %w", r.certFile, r.keyFile, err)
	}
	r.cert, r.mod = &c, mod
	return nil
}

// modified is the later of the two files' modification times.
func (r *certReloader) modified() (time.Time, error) {
	var latest time.Time
	for _, f := range []string{r.certFile, r.keyFile} {
		st, err := os.Stat(f)
		if err != nil {
			return time.Time{}, err
		}
		if st.ModTime().After(latest) {
			latest = st.ModTime()
		}
	}
	return latest, nil
}

// current is the certificate served now.
func (r *certReloader) current() *tls.Certificate {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cert
}

func (r *certReloader) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if now := time.Now(); now.Sub(r.checked) >= certReloadEvery {
		r.checked = now
		if mod, err := r.modified(); err == nil && !mod.Equal(r.mod) {
			if err := r.load(); err != nil {
				// A half-written renewal: keep serving the old one until
				// the files change again.
				r.mod = mod
				r.logger.Warn("reloading the SSL listener's certificate failed; serving the previous one", "err", err)
			} else {
				r.logger.Info("reloaded the SSL listener's certificate", "file", r.certFile)
			}
		}
	}
	if r.cert == nil {
		return nil, errors.New("no certificate")
	}
	return r.cert, nil
}
