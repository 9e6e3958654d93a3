package link

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	kscram "github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/strandlog/strand/internal/cluster"
)

// sourceClient returns a client of the link's source cluster.
func sourceClient(src cluster.LinkSource, extra ...kgo.Opt) (*kgo.Client, error) {
	opts, err := sourceOpts(src)
	if err != nil {
		return nil, err
	}
	return kgo.NewClient(append(opts, extra...)...)
}

// sourceOpts are the client options of a source's settings.
func sourceOpts(src cluster.LinkSource) ([]kgo.Opt, error) {
	opts := []kgo.Opt{kgo.SeedBrokers(src.BootstrapServers...), kgo.ClientID("strand-link"),
		kgo.RetryTimeout(5 * time.Second), kgo.DialTimeout(5 * time.Second)}
	proto := strings.ToUpper(src.SecurityProtocol)
	if proto == "SSL" || proto == "SASL_SSL" {
		tc := &tls.Config{MinVersion: tls.VersionTLS12}
		if src.CACertPEM != "" {
			tc.RootCAs = x509.NewCertPool()
			if !tc.RootCAs.AppendCertsFromPEM([]byte(src.CACertPEM)) {
				return nil, errors.New("the source's CA holds no PEM certificate")
			}
		}
		if src.CertPEM != "" {
			cert, err := tls.X509KeyPair([]byte(src.CertPEM), []byte(src.KeyPEM))
			if err != nil {
				return nil, fmt.Errorf("the client certificate for the source: %w", err)
			}
			tc.Certificates = []tls.Certificate{cert}
		}
		opts = append(opts, kgo.DialTLSConfig(tc))
	}
	if strings.HasPrefix(proto, "SASL") {
		switch src.SASLMechanism {
		case "PLAIN":
			opts = append(opts, kgo.SASL(plain.Auth{User: src.SASLUsername, Pass: src.SASLPassword}.AsMechanism()))
		case "SCRAM-SHA-256":
			opts = append(opts, kgo.SASL(kscram.Auth{User: src.SASLUsername, Pass: src.SASLPassword}.AsSha256Mechanism()))
		case "SCRAM-SHA-512":
			opts = append(opts, kgo.SASL(kscram.Auth{User: src.SASLUsername, Pass: src.SASLPassword}.AsSha512Mechanism()))
		default:
			return nil, fmt.Errorf("SASL mechanism %q", src.SASLMechanism)
		}
	}
	return opts, nil
}

// sourceTopic is one topic as the source's metadata describes it.
type sourceTopic struct {
	name       string
	id         cluster.TopicID
	internal   bool
	partitions []sourcePartition
}

// sourcePartition is where a source partition is led.
type sourcePartition struct {
	leader      int32
	leaderEpoch int32
	err         error
}

// sourceMetadata reads every topic of the source, and its cluster id.
func sourceMetadata(ctx context.Context, cl *kgo.Client) (string, map[string]sourceTopic, error) {
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = nil // all
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return "", nil, err
	}
	topics := map[string]sourceTopic{}
	for _, t := range resp.Topics {
		if t.Topic == nil {
			continue
		}
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			continue // being created or deleted: the next read sees it
		}
		st := sourceTopic{name: *t.Topic, id: t.TopicID, internal: t.IsInternal,
			partitions: make([]sourcePartition, len(t.Partitions))}
		for _, p := range t.Partitions {
			if p.Partition < 0 || int(p.Partition) >= len(st.partitions) {
				continue
			}
			st.partitions[p.Partition] = sourcePartition{leader: p.Leader, leaderEpoch: p.LeaderEpoch, err: kerr.ErrorForCode(p.ErrorCode)}
		}
		topics[st.name] = st
	}
	id := ""
	if resp.ClusterID != nil {
		id = *resp.ClusterID
	}
	return id, topics, nil
}

// mirrorable reports whether a source topic may be mirrored at all:
// internal topics (the source's offsets, transactions, Strand's own) never
// are, whatever the filter says.
func mirrorable(t sourceTopic) bool {
	return !t.internal && !strings.HasPrefix(t.name, "__")
}
