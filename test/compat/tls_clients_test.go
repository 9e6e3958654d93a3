package compat

import (
	"fmt"
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

	// What franz-go reads over TLS is what the others must read.
	produced := grouptest.Produced{}
	cl := client(t, addr, tlsOpt, kgo.ConsumeTopics("tls"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	for produced.Count() < 30 && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(rec *kgo.Record) {
			if produced[rec.Partition] == nil {
				produced[rec.Partition] = map[int64]grouptest.Record{}
			}
			produced[rec.Partition][rec.Offset] = grouptest.Record{Key: string(rec.Key), Value: string(rec.Value)}
		})
	}

	py := fmt.Sprintf(`
import kafka
c = kafka.KafkaConsumer("tls", bootstrap_servers=%q, security_protocol="SSL", ssl_cafile=%q,
    auto_offset_reset="earliest", consumer_timeout_ms=10000, enable_auto_commit=False)
n = 0
for m in c:
    n += 1
    if n == 30:
        break
print(n)
`, addr, files.CA)
	if r := run(time.Minute, "", "", systemPython, "-c", py); r.err != nil || strings.TrimSpace(r.stdout) != "30" {
		t.Errorf("kafka-python over TLS: %v", r)
	}

	java := javaMember(t, addr, "tls", "tls-java", "tls-java", "security.protocol=SSL", "ssl.truststore.type=PEM",
		"ssl.truststore.location="+files.CA)
	grouptest.WaitProcessed(t, ctx, produced, java)
	if err := java.Stop(); err != nil {
		t.Error(err)
	}
}
