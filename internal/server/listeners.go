package server

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"strconv"

	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	kscram "github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/strandlog/strand/internal/cluster"
	"github.com/strandlog/strand/internal/config"
	"github.com/strandlog/strand/internal/peer"
	"github.com/strandlog/strand/internal/scram"
)

// listener is one bound Kafka listener.
type listener struct {
	cfg config.Listener // its Advertise as resolved once bound
	ln  net.Listener    // a TLS listener for SSL and SASL_SSL
}

// initSecurity readies what the listeners' protocols need: the
// certificate the TLS listeners serve, the SASL listeners' internal user
// and token validation, and how this broker speaks to its peers'
// inter-broker listener.
func (s *Server) initSecurity() error {
	var err error
	if s.cfg.UsesTLS() {
		if s.serverTLS, s.certs, err = tlsConfig(s.cfg, s.logger); err != nil {
			return err
		}
	}
	if s.cfg.UsesSASL() {
		if s.self, err = newSelfIdentity(); err != nil {
			return err
		}
		if s.oauth, err = oauthConfig(s.cfg); err != nil {
			return err
		}
	}
	s.peerOpts, err = s.interBrokerOptions()
	return err
}

// listen binds every listener. A listener on port 0 or a wildcard address
// without an advertised address advertises the address it got.
func (s *Server) listen() error {
	var resolved []config.Listener
	for _, lc := range s.cfg.Listeners() {
		ln, err := net.Listen("tcp", lc.Addr)
		if err != nil {
			s.closeListeners()
			return fmt.Errorf("listener %s: %w", lc.Name, err)
		}
		if _, _, err := lc.AdvertisedHostPort(); err != nil {
			if lc.Advertise != "" {
				ln.Close()
				s.closeListeners()
				return fmt.Errorf("listener %s: %w", lc.Name, err)
			}
			addr := ln.Addr().(*net.TCPAddr)
			host := addr.IP.String()
			if addr.IP.IsUnspecified() {
				host = "127.0.0.1"
			}
			lc.Advertise = net.JoinHostPort(host, strconv.Itoa(addr.Port))
		}
		if lc.TLS() {
			ln = tls.NewListener(ln, s.serverTLS)
		}
		s.listeners = append(s.listeners, &listener{cfg: lc, ln: ln})
		resolved = append(resolved, lc)
	}
	s.cfg = s.cfg.WithListeners(resolved)
	s.broker.Config = s.broker.Config.WithListeners(resolved)
	return nil
}

func (s *Server) closeListeners() {
	for _, l := range s.listeners {
		l.ln.Close()
	}
	s.listeners = nil
}

// endpoints are what this broker registers: the inter-broker listener's
// address, where peers connect, and every listener's endpoint.
func (s *Server) endpoints() (host string, port int32, eps []cluster.Endpoint) {
	ib := s.cfg.InterBroker()
	for _, l := range s.cfg.Listeners() {
		h, p, _ := l.AdvertisedHostPort() // resolved by listen
		eps = append(eps, cluster.Endpoint{Listener: l.Name, Host: h, Port: p})
		if l.Name == ib.Name {
			host, port = h, p
		}
	}
	return host, port, eps
}

// interBrokerOptions are how this broker speaks to its peers'
// inter-broker listener: over TLS it checks their certificate against the
// truststore (the system's roots without one) and presents its own; over
// SASL it authenticates as the configured inter-broker user.
func (s *Server) interBrokerOptions() (peer.Options, error) {
	ib := s.cfg.InterBroker()
	var opts peer.Options
	if ib.TLS() {
		tc, err := s.interBrokerTLS()
		if err != nil {
			return opts, err
		}
		opts.TLS = tc
	}
	if ib.SASL() && s.cfg.InterBrokerSASLUser != "" {
		opts.SASL = passwordMechanism(s.cfg.InterBrokerMechanism(), s.cfg.InterBrokerSASLUser, s.cfg.InterBrokerSASLPassword)
	}
	return opts, nil
}

// interBrokerTLS is the client side of TLS to a peer broker.
func (s *Server) interBrokerTLS() (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if s.cfg.SSLTruststore != "" {
		pem, err := os.ReadFile(s.cfg.SSLTruststore)
		if err != nil {
			return nil, fmt.Errorf("ssl.truststore.location: %w", err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("ssl.truststore.location %s: no PEM certificates in it", s.cfg.SSLTruststore)
		}
	}
	if certs := s.certs; certs != nil {
		// The certificate the listeners serve, renewed as they renew it.
		tc.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return certs.get(nil) }
	}
	return tc, nil
}

// quorumTLS are the two sides of TLS on the controller listener when it
// is SSL: its members must present a certificate of the truststore, and
// present this broker's to the others.
func (s *Server) quorumTLS() (serve, dial *tls.Config, err error) {
	if !s.cfg.ControllerTLS() {
		return nil, nil, nil
	}
	serve = s.serverTLS.Clone()
	serve.ClientAuth = tls.RequireAndVerifyClientCert
	if dial, err = s.interBrokerTLS(); err != nil {
		return nil, nil, err
	}
	return serve, dial, nil
}

// passwordMechanism is the client side of a password mechanism.
func passwordMechanism(name, user, password string) sasl.Mechanism {
	switch name {
	case "SCRAM-SHA-512":
		return kscram.Auth{User: user, Pass: password}.AsSha512Mechanism()
	case "SCRAM-SHA-256":
		return kscram.Auth{User: user, Pass: password}.AsSha256Mechanism()
	}
	return plain.Auth{User: user, Pass: password}.AsMechanism()
}

// newPeerClient is a client of the peers' inter-broker listeners.
func (s *Server) newPeerClient() *peer.Client {
	return peer.NewWith(s.cfg.NodeID, s.resolvePeer, s.peerOpts)
}

// ensureInterBrokerUser gives the inter-broker user its SCRAM credential,
// derived from inter.broker.sasl.password, when the cluster has none for
// it: brokers then authenticate to each other from the first start, as a
// Kafka cluster formatted with --add-scram does. A credential already
// there is kept, and one the password does not match is reported.
func (s *Server) ensureInterBrokerUser() error {
	ib := s.cfg.InterBroker()
	user := s.cfg.InterBrokerSASLUser
	if !ib.SASL() || user == "" {
		return nil
	}
	mech := scram.SHA512
	if s.cfg.InterBrokerMechanism() == "SCRAM-SHA-256" {
		mech = scram.SHA256
	}
	if cred, ok := s.cluster.ScramCredentials()[user][int8(mech)]; ok {
		if !mech.Verify(s.cfg.InterBrokerSASLPassword, scram.Credential(cred)) {
			s.logger.Warn("the cluster's credential of the inter-broker user does not match inter.broker.sasl.password: peers will not authenticate",
				"user", user, "mechanism", mech.String())
		}
		return nil
	}
	cred, err := mech.NewCredential(s.cfg.InterBrokerSASLPassword, 4096)
	if err != nil {
		return err
	}
	if err := s.cluster.AlterScramCredentials([]cluster.ScramCredentialChange{{User: user, Mechanism: int8(mech),
		Credential: cluster.ScramCredential(cred)}}, nil); err != nil {
		return fmt.Errorf("creating the inter-broker user's credential: %w", err)
	}
	s.logger.Info("created the inter-broker user's SCRAM credential", "user", user, "mechanism", mech.String())
	return nil
}
