package compat

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	kscram "github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/strandlog/strand/internal/testutil"
	"github.com/strandlog/strand/test/javatest"
)

// aclTool is kafka-acls.sh's main class.
const aclTool = "org.apache.kafka.tools.AclCommand"

// TestKafkaAclsTool: with --authorizer acl on a SASL_PLAINTEXT listener,
// Kafka's own kafka-acls.sh, run by the super user admin, adds ACLs
// (literal, prefixed, for a group, and with its --producer and --consumer
// forms), lists them as Kafka prints them (also with the MATCH pattern
// type), and removes them; and the ACLs rule what alice's franz-go clients
// may do: before any ACL she can neither see nor produce to "orders";
// with them she produces to it, reads it back in group "app" but not in
// group "other", sees it in the topic list, and uses "logs" through the
// convenience forms; a deny of WRITE wins over the allow; once removed,
// she is refused again. alice herself may not list the ACLs.
func TestKafkaAclsTool(t *testing.T) {
	t.Parallel()
	javatest.Helper(t) // build (or skip) before starting a broker
	dir := t.TempDir()
	for _, u := range []string{"admin", "alice"} {
		mustRun(t, time.Minute, "", "", testutil.Binary(t), "user", "create", u, "--mechanism", "SCRAM-SHA-512",
			"--password", u+"-secret", "--data-dir", dir)
	}
	addr := testutil.FreePort(t)
	p := testutil.StartProcess(t, dir, append(groupBrokerArgs, "--listeners", "SASL_PLAINTEXT://"+addr,
		"--sasl-enabled-mechanisms", "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
		"--authorizer", "acl", "--super-users", "User:admin")...)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("strand output:\n%s", p.Output.Tail(60))
		}
	})
	ctx := groupCtx(t, 4*time.Minute)
	as := func(user string) kgo.Opt {
		return kgo.SASL(kscram.Auth{User: user, Pass: user + "-secret"}.AsSha512Mechanism())
	}
	// kafka-acls.sh as user, through a --command-config file.
	commandConfig := func(user string) string {
		f := filepath.Join(t.TempDir(), user+".properties")
		props := "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n" +
			`sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="` +
			user + `" password="` + user + `-secret";` + "\n"
		if err := os.WriteFile(f, []byte(props), 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}
	adminConfig, aliceConfig := commandConfig("admin"), commandConfig("alice")
	acls := func(args ...string) result {
		t.Helper()
		return runKafkaTool(t, aclTool, append([]string{"--bootstrap-server", addr, "--command-config", adminConfig}, args...)...)
	}

	adm := kadm.NewClient(client(t, addr, as("admin")))
	for _, topic := range []string{"orders", "logs"} {
		if _, err := adm.CreateTopic(ctx, 3, 1, nil, topic); err != nil {
			t.Fatalf("admin creates %s: %v", topic, err)
		}
	}

	// produce sends n records to topic as alice from a new client (one
	// whose producer ID failed to load stays failed), and returns what it
	// sent or the first error.
	produce := func(topic string, n int, idempotent bool) (map[string]string, error) {
		t.Helper()
		opts := []kgo.Opt{as("alice"), kgo.RecordRetries(3), kgo.UnknownTopicRetries(3)}
		if !idempotent {
			opts = append(opts, kgo.DisableIdempotentWrite())
		}
		cl := client(t, addr, opts...)
		defer cl.Close()
		pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		sent := map[string]string{}
		var recs []*kgo.Record
		for i := range n {
			k, v := fmt.Sprintf("%s-key-%d", topic, i%5), fmt.Sprintf("%s-value-%d", topic, i)
			sent[v] = k
			recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(k), Value: []byte(v)})
		}
		if err := cl.ProduceSync(pctx, recs...).FirstErr(); err != nil {
			return nil, err
		}
		return sent, nil
	}
	refused := func(what, topic string, idempotent bool, want error) {
		t.Helper()
		_, err := produce(topic, 1, idempotent)
		if !errors.Is(err, want) {
			t.Fatalf("%s: alice's produce to %s (idempotent %v): %v, want %v", what, topic, idempotent, err, want)
		}
	}
	// consume reads topic as alice in group until it has n records, and
	// returns them (value to key) or the first error the poll gives.
	consume := func(group, topic string, n int) (map[string]string, error) {
		t.Helper()
		cl := client(t, addr, as("alice"), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		defer cl.Close()
		cctx, cancel := context.WithTimeout(ctx, 45*time.Second)
		defer cancel()
		got := map[string]string{}
		for len(got) < n {
			fs := cl.PollFetches(cctx)
			if cctx.Err() != nil {
				return got, fmt.Errorf("%d of %d records after the time limit: %w", len(got), n, cctx.Err())
			}
			if errs := fs.Errors(); len(errs) > 0 {
				return got, errs[0].Err
			}
			fs.EachRecord(func(r *kgo.Record) {
				if k, dup := got[string(r.Value)]; dup {
					t.Errorf("group %s read %s twice (key %s)", group, r.Value, k)
				}
				got[string(r.Value)] = string(r.Key)
			})
		}
		if err := cl.CommitUncommittedOffsets(cctx); err != nil {
			return got, fmt.Errorf("commit: %w", err)
		}
		return got, nil
	}
	readsBack := func(group, topic string, sent map[string]string) {
		t.Helper()
		got, err := consume(group, topic, len(sent))
		if err != nil {
			t.Fatalf("alice in group %s reading %s: %v", group, topic, err)
		}
		if fmt.Sprint(got) != fmt.Sprint(sent) {
			t.Fatalf("alice in group %s read %v, want what she produced: %v", group, got, sent)
		}
	}
	sees := func(topic string) bool {
		t.Helper()
		lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		aliceAdm := kadm.NewClient(client(t, addr, as("alice")))
		defer aliceAdm.Close()
		tds, err := aliceAdm.ListTopics(lctx)
		if err != nil {
			t.Fatalf("alice lists the topics: %v", err)
		}
		return tds.Has(topic)
	}

	// No ACL yet: everything is denied to alice (no allow.everyone.if.no.acl.found).
	refused("before any ACL", "orders", true, kerr.TopicAuthorizationFailed)
	refused("before any ACL", "orders", false, kerr.TopicAuthorizationFailed)
	if sees("orders") {
		t.Fatal("alice sees orders before any ACL")
	}
	wantCLI(t, acls("--list"), true)

	const (
		ordersPattern = "ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)"
		ordPattern    = "ResourcePattern(resourceType=TOPIC, name=ord, patternType=PREFIXED)"
		appPattern    = "ResourcePattern(resourceType=GROUP, name=app, patternType=LITERAL)"
		logsPattern   = "ResourcePattern(resourceType=TOPIC, name=logs, patternType=LITERAL)"
		logsAppPat    = "ResourcePattern(resourceType=GROUP, name=logs-app, patternType=LITERAL)"
	)
	entry := func(op, perm string) string {
		return "(principal=User:alice, host=*, operation=" + op + ", permissionType=" + perm + ")"
	}
	wantCLI(t, acls("--add", "--allow-principal", "User:alice", "--operation", "Write", "--operation", "Describe", "--topic", "orders"),
		true, "Adding ACLs for resource `"+ordersPattern+"`", entry("WRITE", "ALLOW"), entry("DESCRIBE", "ALLOW"))
	wantCLI(t, acls("--add", "--allow-principal", "User:alice", "--operation", "Read", "--topic", "ord", "--resource-pattern-type", "prefixed"),
		true, "Adding ACLs for resource `"+ordPattern+"`", entry("READ", "ALLOW"))
	wantCLI(t, acls("--add", "--allow-principal", "User:alice", "--operation", "Read", "--group", "app"),
		true, "Adding ACLs for resource `"+appPattern+"`", entry("READ", "ALLOW"))
	wantCLI(t, acls("--add", "--allow-principal", "User:alice", "--producer", "--topic", "logs"),
		true, "Adding ACLs for resource `"+logsPattern+"`", entry("WRITE", "ALLOW"), entry("DESCRIBE", "ALLOW"), entry("CREATE", "ALLOW"))
	wantCLI(t, acls("--add", "--allow-principal", "User:alice", "--consumer", "--topic", "logs", "--group", "logs-app"),
		true, "Acl (pattern="+logsPattern+", entry="+entry("DESCRIBE", "ALLOW")+") already exists.",
		"Adding ACLs for resource `"+logsPattern+"`", entry("READ", "ALLOW"), "Adding ACLs for resource `"+logsAppPat+"`")

	// listed is what --list prints for each pattern: the entries of its
	// section ("Current ACLs for resource `PATTERN`:" and its lines).
	listed := func(r result) map[string][]string {
		t.Helper()
		if r.err != nil {
			t.Fatalf("kafka-acls --list: %v", r)
		}
		out := map[string][]string{}
		var cur string
		for line := range strings.SplitSeq(r.stdout, "\n") {
			line = strings.TrimSpace(line)
			if rest, ok := strings.CutPrefix(line, "Current ACLs for resource `"); ok {
				cur, _, _ = strings.Cut(rest, "`")
				out[cur] = []string{}
			} else if strings.HasPrefix(line, "(principal=") && cur != "" {
				out[cur] = append(out[cur], line)
			}
		}
		return out
	}
	wantListed := func(what string, got map[string][]string, want map[string][]string) {
		t.Helper()
		norm := func(m map[string][]string) string {
			var parts []string
			for k, v := range m {
				v = append([]string(nil), v...)
				slices.Sort(v)
				parts = append(parts, k+" "+strings.Join(v, " "))
			}
			slices.Sort(parts)
			return strings.Join(parts, "\n")
		}
		if norm(got) != norm(want) {
			t.Fatalf("%s lists\n%s\nwant\n%s", what, norm(got), norm(want))
		}
	}
	all := map[string][]string{
		ordersPattern: {entry("WRITE", "ALLOW"), entry("DESCRIBE", "ALLOW")},
		ordPattern:    {entry("READ", "ALLOW")},
		appPattern:    {entry("READ", "ALLOW")},
		logsPattern:   {entry("WRITE", "ALLOW"), entry("DESCRIBE", "ALLOW"), entry("CREATE", "ALLOW"), entry("READ", "ALLOW")},
		logsAppPat:    {entry("READ", "ALLOW")},
	}
	wantListed("--list", listed(acls("--list")), all)
	wantListed("--list --topic orders", listed(acls("--list", "--topic", "orders")),
		map[string][]string{ordersPattern: all[ordersPattern]})
	wantListed("--list --topic orders --resource-pattern-type match",
		listed(acls("--list", "--topic", "orders", "--resource-pattern-type", "match")),
		map[string][]string{ordersPattern: all[ordersPattern], ordPattern: all[ordPattern]})
	wantListed("--list --principal User:alice --group app", listed(acls("--list", "--principal", "User:alice", "--group", "app")),
		map[string][]string{appPattern: all[appPattern]})

	// A non-super user may not read the ACLs (DESCRIBE on the cluster),
	// nor create or delete any (ALTER on the cluster).
	wantCLI(t, runKafkaTool(t, aclTool, "--bootstrap-server", addr, "--command-config", aliceConfig, "--list"),
		false, "ClusterAuthorizationException")
	aliceAdm := kadm.NewClient(client(t, addr, as("alice")))
	mine := kadm.NewACLs().Allow("User:alice").AllowHosts("*").Topics("mine").Operations(kadm.OpAll).
		ResourcePatternType(kadm.ACLPatternLiteral)
	created, err := aliceAdm.CreateACLs(ctx, mine)
	if err != nil || len(created) != 1 || !errors.Is(created[0].Err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("alice creates an ACL: %+v, %v; want %v", created, err, kerr.ClusterAuthorizationFailed)
	}
	deleted, err := aliceAdm.DeleteACLs(ctx, kadm.NewACLs().Allow("User:alice").AllowHosts().Topics("orders").
		Operations().ResourcePatternType(kadm.ACLPatternAny))
	if err != nil || len(deleted) != 1 || !errors.Is(deleted[0].Err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("alice deletes her ACLs: %+v, %v; want %v", deleted, err, kerr.ClusterAuthorizationFailed)
	}

	// With the ACLs, alice produces (idempotent: WRITE on a topic is
	// enough for InitProducerId, KIP-679) and reads back in group app.
	if !sees("orders") {
		t.Fatal("alice does not see orders with DESCRIBE on it")
	}
	sent, err := produce("orders", 20, true)
	if err != nil {
		t.Fatalf("alice produces to orders with the ACLs: %v", err)
	}
	readsBack("app", "orders", sent)
	if _, err := consume("other", "orders", 1); !errors.Is(err, kerr.GroupAuthorizationFailed) {
		t.Fatalf("alice in group other: %v, want %v", err, kerr.GroupAuthorizationFailed)
	}
	logs, err := produce("logs", 10, true)
	if err != nil {
		t.Fatalf("alice produces to logs with --producer: %v", err)
	}
	readsBack("logs-app", "logs", logs)

	// A deny wins over the allow.
	wantCLI(t, acls("--add", "--deny-principal", "User:alice", "--operation", "Write", "--topic", "orders"),
		true, entry("WRITE", "DENY"))
	wantListed("--list --topic orders with the deny", listed(acls("--list", "--topic", "orders")),
		map[string][]string{ordersPattern: append([]string{entry("WRITE", "DENY")}, all[ordersPattern]...)})
	refused("with a deny of WRITE", "orders", false, kerr.TopicAuthorizationFailed)
	// Idempotent too: InitProducerId passes (she may still write logs),
	// the produce itself is refused.
	refused("with a deny of WRITE", "orders", true, kerr.TopicAuthorizationFailed)
	wantCLI(t, acls("--remove", "--force", "--deny-principal", "User:alice", "--operation", "Write", "--topic", "orders"), true)
	if _, err := produce("orders", 1, false); err != nil {
		t.Fatalf("alice produces to orders once the deny is removed: %v", err)
	}

	// Removing: one resource's ACLs at a time.
	wantCLI(t, acls("--remove", "--force", "--topic", "orders"), true)
	wantCLI(t, acls("--remove", "--force", "--topic", "ord", "--resource-pattern-type", "prefixed"), true)
	wantCLI(t, acls("--remove", "--force", "--allow-principal", "User:alice", "--operation", "Read", "--group", "app"), true)
	wantListed("--list after --remove", listed(acls("--list")),
		map[string][]string{logsPattern: all[logsPattern], logsAppPat: all[logsAppPat]})
	wantListed("--list --topic orders after --remove", listed(acls("--list", "--topic", "orders")), map[string][]string{})
	refused("after --remove", "orders", false, kerr.TopicAuthorizationFailed)
	if sees("orders") {
		t.Fatal("alice sees orders after its ACLs are removed")
	}
	if _, err := consume("app", "logs", 1); !errors.Is(err, kerr.GroupAuthorizationFailed) {
		t.Fatalf("alice reading logs in group app after --remove: %v, want %v", err, kerr.GroupAuthorizationFailed)
	}
	wantCLI(t, acls("--remove", "--force", "--topic", "logs"), true)
	wantCLI(t, acls("--remove", "--force", "--group", "logs-app"), true)
	wantListed("--list once all are removed", listed(acls("--list")), map[string][]string{})

	// DESCRIBE alone shows the topic but writes nothing; an idempotent
	// producer that may write no topic and lacks IDEMPOTENT_WRITE is
	// refused its producer ID (KIP-679).
	wantCLI(t, acls("--add", "--allow-principal", "User:alice", "--operation", "Describe", "--topic", "orders"), true)
	if !sees("orders") {
		t.Fatal("alice does not see orders with DESCRIBE on it")
	}
	refused("with DESCRIBE only", "orders", false, kerr.TopicAuthorizationFailed)
	refused("with DESCRIBE only", "orders", true, kerr.ClusterAuthorizationFailed)
}

// TestAclsNeedAnAuthorizer: without --authorizer, Kafka's kafka-acls.sh
// gets Kafka's SECURITY_DISABLED answer.
func TestAclsNeedAnAuthorizer(t *testing.T) {
	t.Parallel()
	javatest.Helper(t)
	b := startBroker(t)
	wantCLI(t, runKafkaTool(t, aclTool, "--bootstrap-server", b.Addr, "--list"), false,
		"SecurityDisabledException", "No Authorizer is configured")
	wantCLI(t, runKafkaTool(t, aclTool, "--bootstrap-server", b.Addr, "--add", "--allow-principal", "User:alice",
		"--operation", "Read", "--topic", "orders"), false, "SecurityDisabledException")
}
