package compat

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	kscram "github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/strandlog/strand/internal/testutil"
)

// TestACLCLI: `strand acl create`, `list` (all, by resource, MATCH, by
// principal, as JSON) and `delete` manage a broker's ACLs, and a client is
// allowed and then refused as they say; a user who is not a super user is
// refused the commands.
func TestACLCLI(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, u := range []string{"admin", "alice"} {
		mustRun(t, time.Minute, "", "", testutil.Binary(t), "user", "create", u, "--mechanism", "SCRAM-SHA-512",
			"--password", u+"-secret", "--data-dir", dir)
	}
	addr := testutil.FreePort(t)
	p := testutil.StartProcess(t, dir, "--listeners", "SASL_PLAINTEXT://"+addr, "--sasl-enabled-mechanisms", "SCRAM-SHA-512",
		"--authorizer", "acl", "--super-users", "User:admin")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("strand output:\n%s", p.Output.Tail(40))
		}
	})
	as := func(user string, args ...string) result {
		t.Helper()
		return run(time.Minute, "", "", testutil.Binary(t), append(args, "--brokers", addr, "--sasl-mechanism", "SCRAM-SHA-512",
			"--sasl-user", user, "--sasl-password", user+"-secret")...)
	}
	wantCLI(t, as("admin", "topic", "create", "orders", "--partitions", "1"), true)
	produce := func() error {
		cl := client(t, addr, kgo.SASL(kscram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism()),
			kgo.DefaultProduceTopic("orders"), kgo.DisableIdempotentWrite(), kgo.RequestRetries(0))
		ctx := groupCtx(t, 20*time.Second)
		return cl.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr()
	}
	if err := produce(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice before any ACL: %v", err)
	}

	wantCLI(t, as("admin", "acl", "create", "--allow", "User:alice", "--operation", "write", "--operation", "describe", "--topic", "orders"),
		true, "created: allow User:alice write on topic orders (literal) from *")
	wantCLI(t, as("admin", "acl", "create", "--allow", "User:alice", "--operation", "read", "--topic", "ord", "--prefixed"), true)
	wantCLI(t, as("admin", "acl", "create", "--deny", "User:bob", "--operation", "all", "--cluster"), true)
	wantCLI(t, as("admin", "acl", "list"), true, "orders", "prefixed", "User:bob", "kafka-cluster")
	var listed struct {
		ACLs []struct{ ResourceType, Name, Pattern, Principal, Operation, Permission string } `json:"acls"`
	}
	r := as("admin", "acl", "list", "--topic", "orders", "--match", "--format", "json")
	if err := json.Unmarshal([]byte(r.stdout), &listed); err != nil || len(listed.ACLs) != 3 {
		t.Fatalf("MATCH orders: %v %+v (%v)", err, listed, r)
	}
	r = as("admin", "acl", "list", "--deny", "User:bob", "--format", "json")
	if err := json.Unmarshal([]byte(r.stdout), &listed); err != nil || len(listed.ACLs) != 1 || listed.ACLs[0].Permission != "deny" {
		t.Fatalf("bob's denies: %v %+v (%v)", err, listed, r)
	}
	if err := produce(); err != nil {
		t.Fatalf("alice with WRITE on orders: %v", err)
	}
	wantCLI(t, as("alice", "acl", "list"), false, "CLUSTER_AUTHORIZATION_FAILED")
	wantCLI(t, as("admin", "acl", "create", "--allow", "User:alice", "--topic", "orders"), false, "an operation")

	wantCLI(t, as("admin", "acl", "delete", "--topic", "orders"), true, "deleted 2 ACLs")
	if err := produce(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice after the deletion: %v", err)
	}
	r = as("admin", "acl", "list", "--format", "json")
	if err := json.Unmarshal([]byte(r.stdout), &listed); err != nil || len(listed.ACLs) != 2 {
		t.Fatalf("after the deletion: %v %+v (%v)", err, listed, r)
	}
}
