package compat

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/oauth"

	"github.com/strandlog/strand/internal/testutil"
	"github.com/strandlog/strand/test/grouptest"
	"github.com/strandlog/strand/test/librdkafkatest"
)

// TestClientsOverOAuthBearer: librdkafka (kcat) and the Java client (Kafka's
// kafka-topics.sh) authenticate with SASL OAUTHBEARER using their built-in
// unsecured tokens when the broker allows those
// (sasl.oauthbearer.unsecured.enable), kcat produces and consumes, and a
// broker that validates tokens against a JWKS (the default) refuses the
// same unsecured tokens; there, franz-go produces, and kafka-python and
// confluent-kafka read back, with tokens signed by the JWKS's key, over
// SASL_SSL.
func TestClientsOverOAuthBearer(t *testing.T) {
	t.Parallel()
	kcat := needKcat(t)
	start := func(protocol string, extra ...string) string {
		addr := testutil.FreePort(t)
		p := testutil.StartProcess(t, t.TempDir(), append([]string{"--listeners", protocol + "://" + addr,
			"--sasl-enabled-mechanisms", "OAUTHBEARER"}, extra...)...)
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("strand output:\n%s", p.Output.Tail(40))
			}
		})
		return addr
	}
	kcatOAuth := []string{"-X", "security.protocol=sasl_plaintext", "-X", "sasl.mechanisms=OAUTHBEARER",
		"-X", "enable.sasl.oauthbearer.unsecure.jwt=true", "-X", "sasl.oauthbearer.config=principal=alice"}

	open := start("SASL_PLAINTEXT", "--sasl-oauthbearer-unsecured")
	if r := run(kcatTimeout, "", joinLines(kcatLines(20, "oauth")), kcat,
		append([]string{"-P", "-b", open, "-t", "oauth", "-K", ":"}, kcatOAuth...)...); r.err != nil {
		t.Fatalf("kcat produce with an unsecured token: %v", r)
	}
	r := run(kcatTimeout, "", "", kcat, append([]string{"-C", "-b", open, "-t", "oauth", "-o", "beginning", "-e", "-f", "%k:%s\n"},
		kcatOAuth...)...)
	if r.err != nil || len(strings.Fields(r.stdout)) != 20 {
		t.Fatalf("kcat consume with an unsecured token: %v", r)
	}
	props := filepath.Join(t.TempDir(), "oauth.properties")
	if err := os.WriteFile(props, []byte("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=OAUTHBEARER\n"+
		"sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub=\"alice\";\n"),
		0o600); err != nil {
		t.Fatal(err)
	}
	wantCLI(t, runKafkaTool(t, "org.apache.kafka.tools.TopicCommand", "--bootstrap-server", open, "--command-config", props, "--list"),
		true, "oauth")

	iss := testutil.NewIssuer(t, "key-1")
	files := testutil.NewTLSFiles(t)
	strict := start("SASL_SSL", "--sasl-oauthbearer-jwks", "file://"+iss.JWKS, "--ssl-cert", files.ServerCert, "--ssl-key", files.ServerKey)
	kcatTLS := []string{"-X", "security.protocol=sasl_ssl", "-X", "ssl.ca.location=" + files.CA, "-X", "sasl.mechanisms=OAUTHBEARER",
		"-X", "enable.sasl.oauthbearer.unsecure.jwt=true", "-X", "sasl.oauthbearer.config=principal=alice"}
	r = run(kcatTimeout, "", "", kcat, append([]string{"-L", "-b", strict, "-m", "5"}, kcatTLS...)...)
	if r.err == nil {
		t.Fatalf("kcat with an unsecured token was served by a broker validating tokens: %v", r)
	}

	token := iss.Token(t, map[string]any{"sub": "alice", "exp": time.Now().Add(time.Hour).Unix()})
	ctx := groupCtx(t, 2*time.Minute)
	produceKeyed(t, ctx, strict, "signed", "signed", 25, grouptest.Produced{}, kgo.SASL(oauth.Auth{Token: token}.AsMechanism()), kgo.AllowAutoTopicCreation(), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.DialTLSConfig(files.ClientConfig(t, files.CA, false)))
	pythonReads(t, strict, "signed", 25, fmt.Sprintf(`security_protocol="SASL_SSL", ssl_cafile=%q, sasl_mechanism="OAUTHBEARER", `+
		`sasl_oauth_token_provider=type("Provider", (__import__("kafka.oauth.abstract", fromlist=["_"]).AbstractTokenProvider,), `+
		`{"token": lambda self: %q})()`, files.CA, token))
	py := fmt.Sprintf(`
import time, confluent_kafka
c = confluent_kafka.Consumer({"bootstrap.servers": %q, "group.id": "signed-librdkafka", "auto.offset.reset": "earliest",
    "security.protocol": "SASL_SSL", "ssl.ca.location": %q, "sasl.mechanisms": "OAUTHBEARER",
    "oauth_cb": lambda _: (%q, time.time() + 3600)})
c.subscribe(["signed"])
n, deadline = 0, time.time() + 60
while n < 25 and time.time() < deadline:
    m = c.poll(1)
    if m is not None and m.error() is None:
        n += 1
print(n)
c.close()
`, strict, files.CA, token)
	if r := run(90*time.Second, "", "", librdkafkatest.Python(t), "-c", py); r.err != nil || strings.TrimSpace(r.stdout) != "25" {
		t.Errorf("confluent-kafka with a signed token: %v", r)
	}
}
