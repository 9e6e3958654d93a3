package server

import (
	"bytes"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"slices"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	kscram "github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/strandlog/strand/internal/acl"
	"github.com/strandlog/strand/internal/scram"
)

// The broker's own clients of its client listener (the web console, the
// admin API's ledger reads) connect as any client does: over TLS when it
// serves TLS, trusting exactly the certificate it serves, and
// authenticated when it asks for SASL, as an internal user whose
// credential lives in this process only.

// selfUser is the internal user's name; no user of the cluster metadata
// can take it (its credential is looked up here first).
const selfUser = acl.InternalUser

// selfIdentity is the internal user's password and credentials, made at
// start.
type selfIdentity struct {
	password string
	creds    map[scram.Mechanism]scram.Credential
}

func newSelfIdentity() (*selfIdentity, error) {
	b := make([]byte, 32)
	rand.Read(b)
	id := &selfIdentity{password: base64.RawStdEncoding.EncodeToString(b), creds: map[scram.Mechanism]scram.Credential{}}
	for _, m := range []scram.Mechanism{scram.SHA256, scram.SHA512} {
		c, err := m.NewCredential(id.password, scram.MinIterations)
		if err != nil {
			return nil, err
		}
		id.creds[m] = c
	}
	return id, nil
}

// selfClientOpts are the client options of the broker's own clients.
func (s *Server) selfClientOpts() []kgo.Opt {
	var opts []kgo.Opt
	if s.cfg.UsesTLS() && s.certs != nil {
		opts = append(opts, kgo.DialTLSConfig(&tls.Config{MinVersion: tls.VersionTLS12,
			// The broker's own certificate and no other: the address it
			// advertises may not be a name the certificate holds.
			InsecureSkipVerify: true,
			VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
				if cert := s.certs.current(); cert != nil && len(raw) > 0 && len(cert.Certificate) > 0 &&
					bytes.Equal(raw[0], cert.Certificate[0]) {
					return nil
				}
				return errors.New("not this broker's certificate")
			}}))
	}
	if s.cfg.UsesSASL() && s.self != nil {
		auth := kscram.Auth{User: selfUser, Pass: s.self.password}
		switch m := s.cfg.SASLMechanisms; {
		case slices.Contains(m, "SCRAM-SHA-512"):
			opts = append(opts, kgo.SASL(auth.AsSha512Mechanism()))
		case slices.Contains(m, "SCRAM-SHA-256"):
			opts = append(opts, kgo.SASL(auth.AsSha256Mechanism()))
		default:
			opts = append(opts, kgo.SASL(plain.Auth{User: selfUser, Pass: s.self.password}.AsMechanism()))
		}
	}
	return opts
}
