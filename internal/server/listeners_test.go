package server_test

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	kscram "github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/strandlog/strand/internal/cluster"
	"github.com/strandlog/strand/internal/config"
	"github.com/strandlog/strand/internal/scram"
	"github.com/strandlog/strand/internal/testutil"
)

// TestListeners: one broker with a SASL_SSL listener for clients,
// advertised under a name its certificate holds, and a PLAINTEXT one for
// the inside. Each serves its own protocol, and tells a client of the
// brokers and coordinators at their endpoints on the listener it came
// through, as Kafka does.
func TestListeners(t *testing.T) {
	files := testutil.NewTLSFiles(t)
	clientAddr, internalAddr := testutil.FreePort(t), testutil.FreePort(t)
	_, clientPort, _ := net.SplitHostPort(clientAddr)
	advertised := net.JoinHostPort("localhost", clientPort)
	saslBroker(t, "SASL_SSL", func(c *config.Broker) {
		if err := config.ApplyListeners(c, "CLIENT://"+clientAddr+",INTERNAL://"+internalAddr,
			"CLIENT://"+advertised, "CLIENT:SASL_SSL,INTERNAL:PLAINTEXT"); err != nil {
			t.Fatal(err)
		}
		c.SSLKeystore, c.SSLKey = files.ServerCert, files.ServerKey
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	brokersSeen := func(seed string, opts ...kgo.Opt) (string, string) {
		t.Helper()
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seed), kgo.RequestRetries(0), kgo.RetryTimeout(2 * time.Second)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		md := kmsg.NewPtrMetadataRequest()
		resp, err := md.RequestWith(ctx, cl)
		if err != nil {
			t.Fatalf("metadata through %s: %v", seed, err)
		}
		if len(resp.Brokers) != 1 {
			t.Fatalf("metadata through %s: brokers %+v", seed, resp.Brokers)
		}
		fc := kmsg.NewPtrFindCoordinatorRequest()
		fc.CoordinatorKey = "g"
		fr, err := fc.RequestWith(ctx, cl)
		if err != nil || fr.ErrorCode != 0 {
			t.Fatalf("FindCoordinator through %s: %v %+v", seed, err, fr)
		}
		br := resp.Brokers[0]
		return net.JoinHostPort(br.Host, strconv.Itoa(int(br.Port))), net.JoinHostPort(fr.Host, strconv.Itoa(int(fr.Port)))
	}
	secure := []kgo.Opt{kgo.DialTLSConfig(files.ClientConfig(t, files.CA, false)),
		kgo.SASL(kscram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism())}
	if broker, coord := brokersSeen(advertised, secure...); broker != advertised || coord != advertised {
		t.Fatalf("through CLIENT: broker %s, coordinator %s, want %s", broker, coord, advertised)
	}
	if broker, coord := brokersSeen(internalAddr); broker != internalAddr || coord != internalAddr {
		t.Fatalf("through INTERNAL: broker %s, coordinator %s, want %s", broker, coord, internalAddr)
	}
	// Each listener speaks its own protocol only.
	if err := saslPing(t, internalAddr, kscram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism(),
		kgo.DialTLSConfig(files.ClientConfig(t, files.CA, false))); err == nil {
		t.Fatal("TLS served on the PLAINTEXT listener")
	}
	plain, err := kgo.NewClient(kgo.SeedBrokers(advertised), kgo.RequestRetries(0), kgo.RetryTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	short, stop := context.WithTimeout(ctx, 3*time.Second)
	if _, err := kadm.NewClient(plain).ListTopics(short); err == nil {
		t.Fatal("plain TCP served on the SASL_SSL listener")
	}
	stop()
	plain.Close()

	// What is produced through one listener is read through the other.
	prod, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(advertised), kgo.DefaultProduceTopic("both-ways"),
		kgo.AllowAutoTopicCreation()}, secure...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte("over SASL_SSL")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(internalAddr), kgo.ConsumeTopics("both-ways"))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	fs := cons.PollFetches(ctx)
	if err := fs.Err0(); err != nil {
		t.Fatal(err)
	}
	if rs := fs.Records(); len(rs) != 1 || string(rs[0].Value) != "over SASL_SSL" {
		t.Fatalf("read through INTERNAL: %v", rs)
	}

	// DescribeConfigs says the listeners as Kafka's listeners do.
	adm := kadm.NewClient(cons)
	rc, err := adm.DescribeBrokerConfigs(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"listeners":                      "CLIENT://" + clientAddr + ",INTERNAL://" + internalAddr,
		"advertised.listeners":           "CLIENT://" + advertised + ",INTERNAL://" + internalAddr,
		"listener.security.protocol.map": "CLIENT:SASL_SSL,INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT",
	}
	for _, c := range rc[0].Configs {
		if v, ok := want[c.Key]; ok {
			if c.MaybeValue() != v {
				t.Errorf("%s = %q, want %q", c.Key, c.MaybeValue(), v)
			}
			delete(want, c.Key)
		}
	}
	if len(want) > 0 {
		t.Errorf("not described: %v", want)
	}
}

// TestInterBrokerSecurity: a two-broker cluster whose clients and brokers
// both speak SASL_SSL with mutual TLS, on listeners of their own, under
// the ACL authorizer with the inter-broker user its super user, and whose
// metadata quorum speaks mutual TLS on the controller listeners. The
// brokers authenticate to each other (the inter-broker user's credential
// made from its configured password), so a topic needing both replicas
// in sync takes acknowledged writes on either broker, and the ACLs made
// through one broker apply at the other. A stranger without a certificate
// of the truststore is refused by the controller listener.
func TestInterBrokerSecurity(t *testing.T) {
	// Slow: two brokers speaking TLS and SCRAM to each other; replication and ACLs are waited for on each.
	// It waits more than it works, so it runs beside the other slow tests.
	t.Parallel()
	files := testutil.NewTLSFiles(t)
	cl := testutil.StartCluster(t, 2, 0, func(_ int, c *config.Broker) {
		c.ListenerName, c.ListenerProtocol = "CLIENT", "SASL_SSL"
		c.MoreListeners = []config.Listener{{Name: "INTERNAL", Protocol: "SASL_SSL", Addr: testutil.FreePort(t)}}
		c.InterBrokerListener = "INTERNAL"
		c.InterBrokerSASLUser, c.InterBrokerSASLPassword = "broker", "broker-secret"
		c.SASLMechanisms = []string{"SCRAM-SHA-512"}
		c.SSLKeystore, c.SSLKey, c.SSLTruststore, c.SSLClientAuth = files.ServerCert, files.ServerKey, files.CA, "required"
		c.Authorizer, c.SuperUsers = "acl", "User:broker"
		c.DefaultPartitions, c.DefaultReplicationFactor = 2, 2
		c.ControllerProtocol = "SSL"
	})
	strangers := testutil.NewTLSFiles(t) // of another CA
	controller := cl.Brokers[0].Config.ControllerListen
	for _, c := range []struct {
		name    string
		tls     *tls.Config
		refused bool
	}{
		{"no client certificate", files.ClientConfig(t, files.CA, false), true},
		{"a certificate of another CA", strangers.ClientConfig(t, files.CA, true), true},
		{"a certificate of the truststore", files.ClientConfig(t, files.CA, true), false},
	} {
		if refused := controllerRefuses(t, controller, c.tls); refused != c.refused {
			t.Errorf("the controller listener, %s: refused %v", c.name, refused)
		}
	}
	alice, err := scram.SHA512.NewCredential("alice-secret", 4096)
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.Brokers[0].Server().Metadata().AlterScramCredentials([]cluster.ScramCredentialChange{{User: "alice",
		Mechanism: int8(scram.SHA512), Credential: cluster.ScramCredential(alice)}}, nil); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	client := func(seed, user, pass string, opts ...kgo.Opt) *kgo.Client {
		t.Helper()
		c, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seed), kgo.DialTLSConfig(files.ClientConfig(t, files.CA, true)),
			kgo.SASL(kscram.Auth{User: user, Pass: pass}.AsSha512Mechanism()), kgo.RecordDeliveryTimeout(20 * time.Second)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c
	}
	admin := kadm.NewClient(client(cl.Brokers[0].Addr, "broker", "broker-secret"))
	if r, err := admin.CreateTopic(ctx, 2, 2, map[string]*string{"min.insync.replicas": kmsg.StringPtr("2")}, "secure"); err != nil || r.Err != nil {
		t.Fatalf("creating the topic as the super user: %v %v", err, r.Err)
	}
	acls := kadm.NewACLs().Allow("User:alice").Topics("secure").Groups("g").
		Operations(kadm.OpRead, kadm.OpWrite, kadm.OpDescribe).ResourcePatternType(kadm.ACLPatternLiteral)
	if rs, err := admin.CreateACLs(ctx, acls); err != nil {
		t.Fatal(err)
	} else {
		for _, r := range rs {
			if r.Err != nil {
				t.Fatalf("CreateAcls: %v", r.Err)
			}
		}
	}

	// Through broker 1, which leads one partition and follows the other.
	// Not idempotent: an idempotent producer retries a write the followers
	// never take for ever, and this one fails at its delivery timeout.
	prod := client(cl.Brokers[1].Addr, "alice", "alice-secret", kgo.DefaultProduceTopic("secure"), kgo.DisableIdempotentWrite())
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		// The ACLs reach broker 1's image a moment after they are made.
		err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte("probe")}).FirstErr()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("alice's first write: %v", err)
		}
	}
	for i := range 20 {
		r := &kgo.Record{Key: []byte(strconv.Itoa(i)), Value: []byte("v" + strconv.Itoa(i))}
		if err := prod.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("acks=all write %d with both replicas required: %v", i, err)
		}
	}
	md, err := admin.ListTopics(ctx, "secure")
	if err != nil {
		t.Fatal(err)
	}
	leaders := map[int32]bool{}
	for _, p := range md["secure"].Partitions {
		leaders[p.Leader] = true
		if len(p.ISR) != 2 {
			t.Fatalf("partition %d in sync: %v", p.Partition, p.ISR)
		}
	}
	if len(leaders) != 2 {
		t.Fatalf("the partitions' leaders: %v", leaders)
	}
	if err := prod.ProduceSync(ctx, &kgo.Record{Topic: "other", Value: []byte("x")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("a write alice has no ACL for: %v", err)
	}

	cons := client(cl.Brokers[0].Addr, "alice", "alice-secret", kgo.ConsumeTopics("secure"), kgo.ConsumerGroup("g"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := 0
	for got < 21 && ctx.Err() == nil {
		fs := cons.PollFetches(ctx)
		if err := fs.Err0(); err != nil && ctx.Err() == nil {
			t.Fatalf("alice's group read: %v", err)
		}
		got += fs.NumRecords()
	}
	if got != 21 {
		t.Fatalf("read %d records, want 21", got)
	}
}

// controllerRefuses says whether the controller listener at addr ends a
// TLS connection made with tc: it never writes to a member it accepted,
// so an accepted connection's read only times out.
func controllerRefuses(t *testing.T, addr string, tc *tls.Config) bool {
	t.Helper()
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, tc)
	if err != nil {
		return true // refused in the handshake (TLS 1.2)
	}
	defer c.Close()
	// Under TLS 1.3 the server checks the certificate after the client's
	// last handshake message, and says so in an alert.
	_ = c.SetReadDeadline(time.Now().Add(time.Second))
	_, err = c.Read(make([]byte, 1))
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return false
	}
	return true
}

// TestListenerNotFound: through a listener only broker 0 has, Metadata
// lists broker 0 alone and answers a partition broker 1 leads with
// LISTENER_NOT_FOUND and no leader, as Kafka does, and the partitions
// broker 0 leads as usual.
func TestListenerNotFound(t *testing.T) {
	cl := testutil.StartCluster(t, 2, 0, func(node int, c *config.Broker) {
		if node == 0 {
			c.MoreListeners = []config.Listener{{Name: "EXTRA", Protocol: "PLAINTEXT", Addr: testutil.FreePort(t)}}
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	admin := kadm.NewClient(newClient(t, cl.Brokers[0].Addr))
	if r, err := admin.CreateTopic(ctx, 4, 1, nil, "spread"); err != nil || r.Err != nil {
		t.Fatalf("creating the topic: %v %v", err, r.Err)
	}
	extra := newClient(t, cl.Brokers[0].ListenerAddr(t, "EXTRA"))
	req := kmsg.NewPtrMetadataRequest()
	topic := kmsg.NewMetadataRequestTopic()
	topic.Topic = kmsg.StringPtr("spread")
	req.Topics = append(req.Topics, topic)
	resp, err := req.RequestWith(ctx, extra)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Brokers) != 1 || resp.Brokers[0].NodeID != 0 {
		t.Fatalf("brokers through EXTRA: %+v", resp.Brokers)
	}
	md, err := admin.ListTopics(ctx, "spread")
	if err != nil {
		t.Fatal(err)
	}
	led := map[int32]int{}
	for _, p := range resp.Topics[0].Partitions {
		leader := md["spread"].Partitions[p.Partition].Leader
		led[leader]++
		want, wantLeader := int16(0), leader
		if leader == 1 {
			want, wantLeader = kerr.ListenerNotFound.Code, -1
		}
		if p.ErrorCode != want || p.Leader != wantLeader {
			t.Errorf("partition %d led by %d: error %d leader %d, want %d and %d", p.Partition, leader, p.ErrorCode, p.Leader, want, wantLeader)
		}
	}
	if led[0] == 0 || led[1] == 0 {
		t.Fatalf("the partitions' leaders: %v", led)
	}
}
