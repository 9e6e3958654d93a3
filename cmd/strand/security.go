package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	kscram "github.com/twmb/franz-go/pkg/sasl/scram"
)

// clientSecurity is the tools' TLS and SASL flags, as a Kafka client's
// security.protocol, ssl.* and sasl.* settings. A profile can hold them
// too; a flag given wins over the profile.
type clientSecurity struct {
	TLS           bool   `yaml:"tls,omitempty"`
	TLSCA         string `yaml:"tls_ca,omitempty"`
	TLSCert       string `yaml:"tls_cert,omitempty"`
	TLSKey        string `yaml:"tls_key,omitempty"`
	SASLMechanism string `yaml:"sasl_mechanism,omitempty"`
	SASLUser      string `yaml:"sasl_user,omitempty"`
	SASLPassword  string `yaml:"sasl_password,omitempty"`
}

// security is the flags given on the command line.
var security clientSecurity

// securityFlags adds the TLS and SASL flags to a tool's flag set.
func securityFlags(f *pflag.FlagSet) {
	f.BoolVar(&security.TLS, "tls", false, "connect with TLS (implied by --tls-ca and --tls-cert)")
	f.StringVar(&security.TLSCA, "tls-ca", "", "PEM file of the CAs to trust (default: the system's)")
	f.StringVar(&security.TLSCert, "tls-cert", "", "PEM file of a client certificate, for mutual TLS")
	f.StringVar(&security.TLSKey, "tls-key", "", "PEM file of the client certificate's key (default: in --tls-cert)")
	f.StringVar(&security.SASLMechanism, "sasl-mechanism", "", "authenticate with SASL: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")
	f.StringVar(&security.SASLUser, "sasl-user", "", "the SASL user")
	f.StringVar(&security.SASLPassword, "sasl-password", "", "the SASL password (default: STRAND_SASL_PASSWORD)")
}

// merged is the flags over the profile's settings.
func (s clientSecurity) merged(p clientSecurity) clientSecurity {
	pick := func(flag, prof string) string {
		if flag != "" {
			return flag
		}
		return prof
	}
	return clientSecurity{TLS: s.TLS || p.TLS, TLSCA: pick(s.TLSCA, p.TLSCA), TLSCert: pick(s.TLSCert, p.TLSCert),
		TLSKey: pick(s.TLSKey, p.TLSKey), SASLMechanism: pick(s.SASLMechanism, p.SASLMechanism),
		SASLUser: pick(s.SASLUser, p.SASLUser), SASLPassword: pick(s.SASLPassword, p.SASLPassword)}
}

// opts are the client options the settings make.
func (s clientSecurity) opts() ([]kgo.Opt, error) {
	var opts []kgo.Opt
	if s.TLS || s.TLSCA != "" || s.TLSCert != "" {
		tc := &tls.Config{MinVersion: tls.VersionTLS12}
		if s.TLSCA != "" {
			pem, err := os.ReadFile(s.TLSCA)
			if err != nil {
				return nil, fmt.Errorf("--tls-ca: %w", err)
			}
			tc.RootCAs = x509.NewCertPool()
			if !tc.RootCAs.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("--tls-ca %s: no PEM certificates in it", s.TLSCA)
			}
		}
		if s.TLSCert != "" {
			key := s.TLSKey
			if key == "" {
				key = s.TLSCert
			}
			cert, err := tls.LoadX509KeyPair(s.TLSCert, key)
			if err != nil {
				return nil, fmt.Errorf("--tls-cert: %w", err)
			}
			tc.Certificates = []tls.Certificate{cert}
		}
		opts = append(opts, kgo.DialTLSConfig(tc))
	}
	if s.SASLMechanism == "" {
		return opts, nil
	}
	password := s.SASLPassword
	if password == "" {
		password = os.Getenv("STRAND_SASL_PASSWORD")
	}
	if s.SASLUser == "" || password == "" {
		return nil, errors.New("--sasl-mechanism needs --sasl-user and --sasl-password (or STRAND_SASL_PASSWORD)")
	}
	switch s.SASLMechanism {
	case "PLAIN":
		opts = append(opts, kgo.SASL(plain.Auth{User: s.SASLUser, Pass: password}.AsMechanism()))
	case "SCRAM-SHA-256":
		opts = append(opts, kgo.SASL(kscram.Auth{User: s.SASLUser, Pass: password}.AsSha256Mechanism()))
	case "SCRAM-SHA-512":
		opts = append(opts, kgo.SASL(kscram.Auth{User: s.SASLUser, Pass: password}.AsSha512Mechanism()))
	default:
		return nil, fmt.Errorf("--sasl-mechanism %q: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", s.SASLMechanism)
	}
	return opts, nil
}
