package compat

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strandlog/strand/internal/testutil"
)

// TestClientsOverOAuthBearer: librdkafka (kcat) and the Java client (Kafka's
// kafka-topics.sh) authenticate with SASL OAUTHBEARER using their built-in
// unsecured tokens when the broker allows those
// (sasl.oauthbearer.unsecured.enable), kcat produces and consumes, and a
// broker that validates tokens against a JWKS (the default) refuses the
// same unsecured tokens.
func TestClientsOverOAuthBearer(t *testing.T) {
	t.Parallel()
	kcat := needKcat(t)
	start := func(extra ...string) string {
		addr := testutil.FreePort(t)
		p := testutil.StartProcess(t, t.TempDir(), append([]string{"--listeners", "SASL_PLAINTEXT://" + addr,
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

	open := start("--sasl-oauthbearer-unsecured")
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
	strict := start("--sasl-oauthbearer-jwks", "file://"+iss.JWKS)
	r = run(kcatTimeout, "", "", kcat, append([]string{"-L", "-b", strict, "-m", "5"}, kcatOAuth...)...)
	if r.err == nil {
		t.Fatalf("kcat with an unsecured token was served by a broker validating tokens: %v", r)
	}
}
