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

	"github.com/strandlog/strand/internal/acl"
	"github.com/strandlog/strand/internal/scram"
)

// The broker's own clients (the web console, the admin API's ledger
// reads) connect to its inter-broker listener as any client does: over
// TLS when it serves TLS, and authenticated when it asks for SASL, as the
// inter-broker user in a cluster or, on a single node, as an internal
// user whose credential lives in this process only.

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

// selfAddr is where the broker's own clients connect: its inter-broker
// listener.
func (s *Server) selfAddr() string { return s.cfg.InterBroker().AdvertisedAddr() }

// selfClientOpts are the client options of the broker's own clients.
func (s *Server) selfClientOpts() []kgo.Opt {
	ib := s.cfg.InterBroker()
	var opts []kgo.Opt
	if ib.TLS() && s.certs != nil {
		var roots *x509.CertPool
		if s.peerOpts.TLS != nil {
			roots = s.peerOpts.TLS.RootCAs
		}
		certs := s.certs
		opts = append(opts, kgo.DialTLSConfig(&tls.Config{MinVersion: tls.VersionTLS12,
			GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return certs.get(nil) },
			// This broker's own certificate, whatever names it holds (the
			// address it advertises may not be one); a peer's as any
			// client checks it.
			InsecureSkipVerify: true,
			VerifyConnection: func(cs tls.ConnectionState) error {
				if len(cs.PeerCertificates) == 0 {
					return errors.New("no certificate")
				}
				if own := certs.current(); own != nil && len(own.Certificate) > 0 && bytes.Equal(cs.PeerCertificates[0].Raw, own.Certificate[0]) {
					return nil
				}
				inter := x509.NewCertPool()
				for _, c := range cs.PeerCertificates[1:] {
					inter.AddCert(c)
				}
				_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, DNSName: cs.ServerName})
				return err
			}}))
	}
	if !ib.SASL() {
		return opts
	}
	if s.cfg.InterBrokerSASLUser != "" {
		return append(opts, kgo.SASL(passwordMechanism(s.cfg.InterBrokerMechanism(), s.cfg.InterBrokerSASLUser, s.cfg.InterBrokerSASLPassword)))
	}
	if s.self != nil {
		mech := "PLAIN"
		for _, m := range []string{"SCRAM-SHA-512", "SCRAM-SHA-256"} {
			if slices.Contains(s.cfg.SASLMechanisms, m) {
				mech = m
				break
			}
		}
		opts = append(opts, kgo.SASL(passwordMechanism(mech, selfUser, s.self.password)))
	}
	return opts
}
