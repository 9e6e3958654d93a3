package compat

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	kscram "github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/strandlog/strand/internal/inspect"
	"github.com/strandlog/strand/internal/testutil"
	"github.com/strandlog/strand/test/grouptest"
	"github.com/strandlog/strand/test/librdkafkatest"
)

// TestClientsOverSecureListeners: a two-broker cluster configured as a
// production Kafka is, with a SASL_SSL listener for clients, another for
// the brokers' own traffic (authenticated as an inter-broker user made from
// its password) and the metadata quorum over mutual TLS, under the ACL
// authorizer. Kafka's kafka-configs.sh adds a user through the client
// listener; kcat lists the brokers at their client addresses only,
// produces to a topic that needs both replicas in sync, and the Java client
// and kafka-python read it all back through the other broker; librdkafka
// through confluent-kafka produces idempotently through one broker and
// reads back in a group through the other.
func TestClientsOverSecureListeners(t *testing.T) {
	t.Parallel()
	kcat := needKcat(t)
	needKafkaPython(t)
	confluent := librdkafkatest.Python(t)
	files := testutil.NewTLSFiles(t)
	const n = 2
	var clients, internals, controllers, voters []string
	for i := range n {
		clients, internals, controllers = append(clients, testutil.FreePort(t)), append(internals, testutil.FreePort(t)),
			append(controllers, testutil.FreePort(t))
		voters = append(voters, fmt.Sprintf("%d@%s", i, controllers[i]))
	}
	procs := make([]*testutil.Process, n)
	for i := range n {
		procs[i] = testutil.StartProcess(t, "", append(clusterArgs, "--node-id", fmt.Sprint(i),
			"--listeners", fmt.Sprintf("CLIENT://%s,INTERNAL://%s,CONTROLLER://%s", clients[i], internals[i], controllers[i]),
			"--listener-security-protocol-map", "CLIENT:SASL_SSL,INTERNAL:SASL_SSL,CONTROLLER:SSL",
			"--controller-quorum-voters", strings.Join(voters, ","),
			"--inter-broker-listener-name", "INTERNAL",
			"--inter-broker-sasl-username", "broker", "--inter-broker-sasl-password", "broker-secret",
			"--sasl-enabled-mechanisms", "SCRAM-SHA-512",
			"--ssl-cert", files.ServerCert, "--ssl-key", files.ServerKey, "--ssl-ca", files.CA,
			"--authorizer", "acl", "--super-users", "User:broker")...)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for i, p := range procs {
				t.Logf("broker %d output (last 6 KiB):\n%s", i, tail(p.Output.String(), 6<<10))
			}
		}
	})
	ctx := groupCtx(t, 3*time.Minute)
	tlsOpt := kgo.DialTLSConfig(files.ClientConfig(t, files.CA, false))
	asBroker := kgo.SASL(kscram.Auth{User: "broker", Pass: "broker-secret"}.AsSha512Mechanism())
	adm := kadm.NewClient(client(t, clients[0], tlsOpt, asBroker))
	testutil.EventuallyEvery(t, 30*time.Second, 100*time.Millisecond, func() error {
		// Both brokers registered, the inter-broker user's credential made.
		// Asked afresh each time: kadm's BrokerMetadata would answer from
		// the client's cache, which still lists only broker 0 if it was
		// filled before broker 1 was unfenced.
		m, err := inspect.LiveBrokers(ctx, adm)
		if err != nil || len(m.Brokers) != n {
			return fmt.Errorf("the cluster through its client listener: %v %+v, want %d brokers", err, m, n)
		}
		return nil
	})
	for _, topic := range []string{"secure", "secure-librdkafka"} {
		if r, err := adm.CreateTopic(ctx, 2, 2, map[string]*string{"min.insync.replicas": kmsg.StringPtr("2")}, topic); err != nil || r.Err != nil {
			t.Fatalf("creating %s: %v %v", topic, err, r.Err)
		}
	}

	// Kafka's kafka-configs.sh, as the inter-broker user, adds alice.
	props := filepath.Join(t.TempDir(), "admin.properties")
	if err := os.WriteFile(props, []byte(strings.Join([]string{"security.protocol=SASL_SSL", "sasl.mechanism=SCRAM-SHA-512",
		`sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" password="broker-secret";`,
		"ssl.truststore.type=PEM", "ssl.truststore.location=" + files.CA}, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	wantCLI(t, runKafkaTool(t, configTool, "--bootstrap-server", clients[1], "--command-config", props, "--alter",
		"--add-config", "SCRAM-SHA-512=[password=alice-secret]", "--entity-type", "users", "--entity-name", "alice"),
		true, "Completed updating config for user alice")
	acls := kadm.NewACLs().Allow("User:alice").Topics("secure", "secure-librdkafka").Groups("secure-java", "secure-librdkafka").
		Operations(kadm.OpRead, kadm.OpWrite, kadm.OpDescribe).ResourcePatternType(kadm.ACLPatternLiteral)
	if rs, err := adm.CreateACLs(ctx, acls); err != nil {
		t.Fatal(err)
	} else {
		for _, r := range rs {
			if r.Err != nil {
				t.Fatalf("CreateAcls: %v", r.Err)
			}
		}
	}

	sasl := []string{"-X", "security.protocol=sasl_ssl", "-X", "ssl.ca.location=" + files.CA, "-X", "sasl.mechanisms=SCRAM-SHA-512",
		"-X", "sasl.username=alice", "-X", "sasl.password=alice-secret"}
	var list result
	testutil.EventuallyEvery(t, 20*time.Second, 200*time.Millisecond, func() error {
		// alice's credential and ACLs reach broker 1 a moment after they
		// are made.
		list = run(kcatTimeout, "", "", kcat, append([]string{"-L", "-b", clients[1], "-t", "secure", "-m", "5"}, sasl...)...)
		if list.err != nil || !strings.Contains(list.stdout, "2 partitions") {
			return fmt.Errorf("kcat -L as alice: %v", list)
		}
		return nil
	})
	for i := range n {
		// librdkafka prints "broker 0 at host:port".
		if !regexp.MustCompile(fmt.Sprintf(`broker %d at %s\b`, i, regexp.QuoteMeta(clients[i]))).MatchString(list.stdout) ||
			strings.Contains(list.stdout, internals[i]) {
			t.Errorf("kcat -L through the client listener does not give broker %d at %s only:\n%s", i, clients[i], list.stdout)
		}
	}
	if r := run(kcatTimeout, "", joinLines(kcatLines(30, "secure")), kcat,
		append([]string{"-P", "-b", clients[0], "-t", "secure", "-K", ":", "-X", "acks=all"}, sasl...)...); r.err != nil {
		t.Fatalf("kcat produce as alice: %v", r)
	}

	auth := kgo.SASL(kscram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism())
	produced := readProduced(t, ctx, clients[1], "secure", 30, tlsOpt, auth)
	pythonReads(t, clients[1], "secure", 30, fmt.Sprintf(`security_protocol="SASL_SSL", ssl_cafile=%q, sasl_mechanism="SCRAM-SHA-512", `+
		`sasl_plain_username="alice", sasl_plain_password="alice-secret"`, files.CA))
	java := javaMember(t, clients[1], "secure", "secure-java", "secure-java", "security.protocol=SASL_SSL",
		"ssl.truststore.type=PEM", "ssl.truststore.location="+files.CA, "sasl.mechanism=SCRAM-SHA-512",
		`sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="alice-secret";`)
	grouptest.WaitProcessed(t, ctx, produced, java)
	if err := java.Stop(); err != nil {
		t.Error(err)
	}

	librdkafka := []string{"security.protocol=SASL_SSL", "ssl.ca.location=" + files.CA, "sasl.mechanisms=SCRAM-SHA-512",
		"sasl.username=alice", "sasl.password=alice-secret"}
	const records = 40
	r := run(2*time.Minute, pythonDir, "", confluent, append([]string{"cluster_librdkafka.py", "produce", clients[0], "secure-librdkafka",
		fmt.Sprint(records), "enable.idempotence=true"}, librdkafka...)...)
	if r.err != nil {
		t.Fatalf("confluent-kafka producer as alice: %v", r)
	}
	acked := checkAcked(t, parseHelper(t, r.stdout), records)
	r = run(2*time.Minute, pythonDir, "", confluent, append([]string{"cluster_librdkafka.py", "consume", clients[1], "secure-librdkafka",
		"secure-librdkafka", fmt.Sprint(records), "compat.deadline.ms=60000"}, librdkafka...)...)
	if r.err != nil {
		t.Fatalf("confluent-kafka consumer as alice: %v", r)
	}
	checkReadBack(t, "confluent-kafka Consumer", acked, parseHelper(t, r.stdout).records)
}
