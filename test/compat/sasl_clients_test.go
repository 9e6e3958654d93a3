package compat

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	kscram "github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/strandlog/strand/internal/testutil"
	"github.com/strandlog/strand/test/grouptest"
)

// TestClientsOverSASL: the first user is made with strand user create in
// the stopped broker's data directory; then kcat (librdkafka),
// kafka-python, the Java client and franz-go authenticate with SCRAM (and
// kcat with PLAIN) on a SASL_PLAINTEXT listener, produce and consume, and
// kcat with a wrong password is refused.
func TestClientsOverSASL(t *testing.T) {
	t.Parallel()
	kcat := needKcat(t)
	needKafkaPython(t)
	dir := t.TempDir()
	mustRun(t, time.Minute, "", "", testutil.Binary(t), "user", "create", "alice", "--mechanism", "SCRAM-SHA-512",
		"--password", "alice-secret", "--data-dir", dir)
	mustRun(t, time.Minute, "", "", testutil.Binary(t), "user", "create", "alice", "--mechanism", "SCRAM-SHA-256",
		"--password", "alice-secret", "--data-dir", dir)
	addr := testutil.FreePort(t)
	p := testutil.StartProcess(t, dir, append(groupBrokerArgs, "--listeners", "SASL_PLAINTEXT://"+addr,
		"--sasl-enabled-mechanisms", "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512")...)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("strand output:\n%s", p.Output.Tail(60))
		}
	})
	ctx := groupCtx(t, 3*time.Minute)
	auth := kgo.SASL(kscram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism())
	adm := kadm.NewClient(client(t, addr, auth))
	if _, err := adm.CreateTopic(ctx, 3, 1, nil, "sasl"); err != nil {
		t.Fatal(err)
	}

	sasl := func(mech, password string) []string {
		return []string{"-X", "security.protocol=sasl_plaintext", "-X", "sasl.mechanisms=" + mech,
			"-X", "sasl.username=alice", "-X", "sasl.password=" + password}
	}
	if r := run(kcatTimeout, "", joinLines(kcatLines(30, "sasl")), kcat,
		append([]string{"-P", "-b", addr, "-t", "sasl", "-K", ":"}, sasl("SCRAM-SHA-512", "alice-secret")...)...); r.err != nil {
		t.Fatalf("kcat produce with SCRAM-SHA-512: %v", r)
	}
	r := run(kcatTimeout, "", "", kcat, append([]string{"-C", "-b", addr, "-t", "sasl", "-o", "beginning", "-e", "-f", "%k:%s\n"},
		sasl("PLAIN", "alice-secret")...)...)
	if r.err != nil || len(strings.Fields(r.stdout)) != 30 {
		t.Fatalf("kcat consume with PLAIN: %v", r)
	}
	if r := run(kcatTimeout, "", "", kcat, append([]string{"-L", "-b", addr, "-m", "5"}, sasl("SCRAM-SHA-256", "guess")...)...); r.err == nil {
		t.Errorf("kcat with a wrong password listed the cluster: %v", r)
	}

	// strand's own tools, with their SASL flags or a profile that has them.
	strand := func(args ...string) result {
		return run(time.Minute, "", "", testutil.Binary(t), append(args, "--brokers", addr)...)
	}
	creds := []string{"--sasl-mechanism", "SCRAM-SHA-512", "--sasl-user", "alice", "--sasl-password", "alice-secret"}
	wantCLI(t, strand(append([]string{"topic", "list"}, creds...)...), true, "sasl")
	if r := strand(append([]string{"consume", "sasl", "-e", "--format", "%v\n"}, creds...)...); r.err != nil || strings.Count(r.stdout, "\n") != 30 {
		t.Errorf("strand consume over SASL: %v", r)
	}
	wantCLI(t, strand("topic", "list", "--sasl-mechanism", "SCRAM-SHA-512", "--sasl-user", "alice", "--sasl-password", "guess"), false)
	profiles := filepath.Join(t.TempDir(), "profiles.yaml")
	env := func(args ...string) result {
		cmd := exec.Command(testutil.Binary(t), args...)
		cmd.Env = append(os.Environ(), "STRAND_PROFILES="+profiles)
		out, err := cmd.CombinedOutput()
		return result{cmdline: strings.Join(args, " "), stdout: string(out), err: err}
	}
	wantCLI(t, env(append([]string{"profile", "create", "secure", "--brokers", addr}, creds...)...), true, "the current profile")
	wantCLI(t, env("topic", "list"), true, "sasl")

	produced := readProduced(t, ctx, addr, "sasl", 30, auth)
	pythonReads(t, addr, "sasl", 30, `security_protocol="SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-256", `+
		`sasl_plain_username="alice", sasl_plain_password="alice-secret"`)

	java := javaMember(t, addr, "sasl", "sasl-java", "sasl-java", "security.protocol=SASL_PLAINTEXT", "sasl.mechanism=SCRAM-SHA-512",
		`sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="alice-secret";`)
	grouptest.WaitProcessed(t, ctx, produced, java)
	if err := java.Stop(); err != nil {
		t.Error(err)
	}
}
