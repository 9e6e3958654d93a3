package compat

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandlog/strand/internal/testutil"
	"github.com/strandlog/strand/test/grouptest"
)

// TestClientsOverTLS: kcat (librdkafka), kafka-python, the Java client and
// franz-go produce and consume through an SSL listener, trusting its CA,
// and kcat is refused when it trusts another CA.
func TestClientsOverTLS(t *testing.T) {
	t.Parallel()
	kcat := needKcat(t)
	needKafkaPython(t)
	files := testutil.NewTLSFiles(t)
	addr := testutil.FreePort(t)
	startBroker(t, append(groupBrokerArgs, "--listeners", "SSL://"+addr, "--ssl-cert", files.ServerCert, "--ssl-key", files.ServerKey)...)
	ctx := groupCtx(t, 3*time.Minute)
	tlsOpt := kgo.DialTLSConfig(files.ClientConfig(t, files.CA, false))
	adm := kadm.NewClient(client(t, addr, tlsOpt))
	if _, err := adm.CreateTopic(ctx, 3, 1, nil, "tls"); err != nil {
		t.Fatal(err)
	}

	ssl := []string{"-X", "security.protocol=ssl", "-X", "ssl.ca.location=" + files.CA}
	lines := kcatLines(30, "tls")
	if r := run(kcatTimeout, "", joinLines(lines), kcat, append([]string{"-P", "-b", addr, "-t", "tls", "-K", ":"}, ssl...)...); r.err != nil {
		t.Fatalf("kcat produce over TLS: %v", r)
	}
	r := run(kcatTimeout, "", "", kcat, append([]string{"-C", "-b", addr, "-t", "tls", "-o", "beginning", "-e", "-f", "%k:%s\n"}, ssl...)...)
	if r.err != nil || len(strings.Fields(r.stdout)) != 30 {
		t.Fatalf("kcat consume over TLS: %v", r)
	}
	wrong := []string{"-X", "security.protocol=ssl", "-X", "ssl.ca.location=" + files.OtherCA, "-m", "5"}
	if r := run(kcatTimeout, "", "", kcat, append([]string{"-L", "-b", addr}, wrong...)...); r.err == nil {
		t.Errorf("kcat trusting another CA listed the cluster: %v", r)
	}

	wantCLI(t, run(time.Minute, "", "", testutil.Binary(t), "topic", "list", "--brokers", addr, "--tls-ca", files.CA), true, "tls")
	wantCLI(t, run(time.Minute, "", "", testutil.Binary(t), "topic", "list", "--brokers", addr, "--tls-ca", files.OtherCA,
		"--timeout", "5s"), false)

	produced := readProduced(t, ctx, addr, "tls", 30, tlsOpt)
	pythonReads(t, addr, "tls", 30, fmt.Sprintf("security_protocol=\"SSL\", ssl_cafile=%q", files.CA))

	java := javaMember(t, addr, "tls", "tls-java", "tls-java", "security.protocol=SSL", "ssl.truststore.type=PEM",
		"ssl.truststore.location="+files.CA)
	grouptest.WaitProcessed(t, ctx, produced, java)
	if err := java.Stop(); err != nil {
		t.Error(err)
	}
}

// TestClientsOverMutualTLS: with ssl.client.auth=required and the ACL
// authorizer, kcat (librdkafka), kafka-python, the Java client (its PEM
// keystore given inline, as Kafka takes it) and franz-go present client-1's
// certificate, whose subject User:CN=client-1 is a super user, and produce
// and consume; kcat without a certificate is refused at the handshake, and
// with client-2's (signed by the same CA, no ACL) it is authenticated but
// not authorised.
func TestClientsOverMutualTLS(t *testing.T) {
	t.Parallel()
	kcat := needKcat(t)
	needKafkaPython(t)
	files := testutil.NewTLSFiles(t)
	otherCert, otherKey := files.Issue(t, "client-2", "client-2", false)
	addr := testutil.FreePort(t)
	startBroker(t, append(groupBrokerArgs, "--listeners", "SSL://"+addr, "--ssl-cert", files.ServerCert, "--ssl-key", files.ServerKey,
		"--ssl-ca", files.CA, "--ssl-client-auth", "required", "--authorizer", "acl", "--super-users", "User:CN=client-1")...)
	ctx := groupCtx(t, 3*time.Minute)
	tlsOpt := kgo.DialTLSConfig(files.ClientConfig(t, files.CA, true))
	adm := kadm.NewClient(client(t, addr, tlsOpt))
	if _, err := adm.CreateTopic(ctx, 3, 1, nil, "mtls"); err != nil {
		t.Fatal(err)
	}

	ssl := func(cert, key string) []string {
		args := []string{"-X", "security.protocol=ssl", "-X", "ssl.ca.location=" + files.CA}
		if cert != "" {
			args = append(args, "-X", "ssl.certificate.location="+cert, "-X", "ssl.key.location="+key)
		}
		return args
	}
	if r := run(kcatTimeout, "", joinLines(kcatLines(30, "mtls")), kcat,
		append([]string{"-P", "-b", addr, "-t", "mtls", "-K", ":"}, ssl(files.ClientCert, files.ClientKey)...)...); r.err != nil {
		t.Fatalf("kcat produce with client-1's certificate: %v", r)
	}
	if r := run(kcatTimeout, "", "", kcat, append([]string{"-L", "-b", addr, "-m", "5"}, ssl("", "")...)...); r.err == nil {
		t.Errorf("kcat without a certificate listed the cluster: %v", r)
	}
	r := run(kcatTimeout, "", "", kcat, append([]string{"-L", "-b", addr, "-t", "mtls", "-m", "5"}, ssl(otherCert, otherKey)...)...)
	if !strings.Contains(strings.ToLower(r.stdout+r.stderr), "topic authorization failed") {
		t.Errorf("kcat as User:CN=client-2 (no ACL): %v", r)
	}

	produced := readProduced(t, ctx, addr, "mtls", 30, tlsOpt)
	pythonReads(t, addr, "mtls", 30, fmt.Sprintf("security_protocol=\"SSL\", ssl_cafile=%q, ssl_certfile=%q, ssl_keyfile=%q",
		files.CA, files.ClientCert, files.ClientKey))
	cert, err := os.ReadFile(files.ClientCert)
	if err != nil {
		t.Fatal(err)
	}
	key, err := os.ReadFile(files.ClientKey)
	if err != nil {
		t.Fatal(err)
	}
	java := javaMember(t, addr, "mtls", "mtls-java", "mtls-java", "security.protocol=SSL", "ssl.truststore.type=PEM",
		"ssl.truststore.location="+files.CA, "ssl.keystore.type=PEM", "ssl.keystore.certificate.chain="+string(cert),
		"ssl.keystore.key="+string(key))
	grouptest.WaitProcessed(t, ctx, produced, java)
	if err := java.Stop(); err != nil {
		t.Error(err)
	}
}

// readProduced reads n records of topic from its start with franz-go (opts
// carrying the TLS or SASL options), as the other clients must read them.
func readProduced(t *testing.T, ctx context.Context, addr, topic string, n int, opts ...kgo.Opt) grouptest.Produced {
	t.Helper()
	produced := grouptest.Produced{}
	cl := client(t, addr, append(opts, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	for produced.Count() < n && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(rec *kgo.Record) {
			if produced[rec.Partition] == nil {
				produced[rec.Partition] = map[int64]grouptest.Record{}
			}
			produced[rec.Partition][rec.Offset] = grouptest.Record{Key: string(rec.Key), Value: string(rec.Value)}
		})
	}
	return produced
}

// pythonReads checks that kafka-python, with the KafkaConsumer arguments
// args (Python syntax), reads n records of topic from its start.
func pythonReads(t *testing.T, addr, topic string, n int, args string) {
	t.Helper()
	py := fmt.Sprintf(`
import kafka
c = kafka.KafkaConsumer(%q, bootstrap_servers=%q, %s,
    auto_offset_reset="earliest", consumer_timeout_ms=10000, enable_auto_commit=False)
n = 0
for m in c:
    n += 1
    if n == %d:
        break
print(n)
`, topic, addr, args, n)
	if r := run(time.Minute, "", "", systemPython, "-c", py); r.err != nil || strings.TrimSpace(r.stdout) != fmt.Sprint(n) {
		t.Errorf("kafka-python (%s): %v", args, r)
	}
}
