package server_test

import (
	"context"
	"errors"
	"github.com/strandlog/strand/internal/model"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	kscram "github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/strandlog/strand/internal/cluster"
	"github.com/strandlog/strand/internal/config"
	"github.com/strandlog/strand/internal/scram"
	"github.com/strandlog/strand/internal/testutil"
)

// saslBroker starts a SASL_PLAINTEXT broker offering every mechanism, with
// user alice's SCRAM-SHA-256 and SCRAM-SHA-512 credentials.
func saslBroker(t *testing.T, protocol string, edit func(*config.Broker)) *testutil.Broker {
	t.Helper()
	b := testutil.StartBroker(t, func(c *config.Broker) {
		c.ListenerProtocol, c.SASLMechanisms = protocol, []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}
		if edit != nil {
			edit(c)
		}
	})
	var ups []cluster.ScramCredentialChange
	for _, m := range []scram.Mechanism{scram.SHA256, scram.SHA512} {
		c, err := m.NewCredential("alice-secret", 4096)
		if err != nil {
			t.Fatal(err)
		}
		ups = append(ups, cluster.ScramCredentialChange{User: "alice", Mechanism: int8(m), Credential: cluster.ScramCredential(c)})
	}
	if err := b.Server().Metadata().AlterScramCredentials(ups, nil); err != nil {
		t.Fatal(err)
	}
	return b
}

// saslPing is the error of a client authenticating with mech.
func saslPing(t *testing.T, addr string, mech sasl.Mechanism, extra ...kgo.Opt) error {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.SASL(mech), kgo.RequestRetries(0),
		kgo.RetryTimeout(time.Second)}, extra...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = kadm.NewClient(cl).ListTopics(ctx)
	return err
}

// TestSASL: PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 authenticate with the
// right password and are refused with a wrong one or an unknown user; a
// client without SASL gets nothing but its ApiVersions.
func TestSASL(t *testing.T) {
	b := saslBroker(t, "SASL_PLAINTEXT", nil)
	right := map[string]sasl.Mechanism{
		"PLAIN":         plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism(),
		"SCRAM-SHA-256": kscram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism(),
		"SCRAM-SHA-512": kscram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism(),
	}
	wrong := map[string]sasl.Mechanism{
		"PLAIN, wrong password":         plain.Auth{User: "alice", Pass: "guess"}.AsMechanism(),
		"SCRAM-SHA-256, wrong password": kscram.Auth{User: "alice", Pass: "guess"}.AsSha256Mechanism(),
		"SCRAM-SHA-512, unknown user":   kscram.Auth{User: "mallory", Pass: "alice-secret"}.AsSha512Mechanism(),
	}
	for name, m := range right {
		if err := saslPing(t, b.Addr, m); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	for name, m := range wrong {
		if err := saslPing(t, b.Addr, m); err == nil {
			t.Errorf("%s: served", name)
		}
	}
	// Without SASL: ApiVersions is answered, then anything else closes.
	c := dialRaw(t, b.Addr)
	c.do(kmsg.NewPtrApiVersionsRequest())
	c.write(func() []byte { f, _ := c.frame(kmsg.NewPtrMetadataRequest()); return f }())
	c.expectClosed()
	// A frame too big for a client not yet authenticated closes too.
	big := dialRaw(t, b.Addr)
	big.write(append([]byte{0, 0x10, 0, 0}, make([]byte, 64)...))
	big.expectClosed()

	// A client that authenticated produces and consumes.
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.SASL(right["SCRAM-SHA-512"]), kgo.DefaultProduceTopic("auth"),
		kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("hello")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// TestSASLOverTLS: SASL_SSL, SCRAM over TLS.
func TestSASLOverTLS(t *testing.T) {
	files := testutil.NewTLSFiles(t)
	b := saslBroker(t, "SASL_SSL", func(c *config.Broker) { c.SSLKeystore, c.SSLKey = files.ServerCert, files.ServerKey })
	tlsOpt := kgo.DialTLSConfig(files.ClientConfig(t, files.CA, false))
	if err := saslPing(t, b.Addr, kscram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism(), tlsOpt); err != nil {
		t.Fatal(err)
	}
	if err := saslPing(t, b.Addr, kscram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism()); err == nil {
		t.Fatal("SASL without TLS served on a SASL_SSL listener")
	}
}

// TestConsoleBehindSASLAndTLS: the broker's own clients (the console, the
// ledger reads of the admin API) authenticate to a SASL listener and trust
// a TLS listener's certificate, so its pages show the cluster.
func TestConsoleBehindSASLAndTLS(t *testing.T) {
	files := testutil.NewTLSFiles(t)
	b := saslBroker(t, "SASL_SSL", func(c *config.Broker) {
		c.SSLKeystore, c.SSLKey = files.ServerCert, files.ServerKey
		c.AdminListen = "127.0.0.1:0"
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.DialTLSConfig(files.ClientConfig(t, files.CA, false)),
		kgo.SASL(kscram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, "behind-sasl"); err != nil {
		t.Fatal(err)
	}
	page := "http://" + b.Server().AdminAddr().String() + "/topics"
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		resp, err := http.Get(page)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK && strings.Contains(string(body), `data-topic="behind-sasl"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the console's topics page: %s\n%s", resp.Status, body)
		}
	}
	resp, err := http.Get("http://" + b.Server().AdminAddr().String() + "/api/handoffs")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/api/handoffs: %s", resp.Status)
	}
}

// TestSASLReauthentication: with connections.max.reauth.ms an
// authentication lasts that long (SessionLifetimeMs, KIP-368): a client
// that re-authenticates on its connection keeps being served, as the same
// principal only; one that does not is closed at its next request.
func TestSASLReauthentication(t *testing.T) {
	// Slow: an authentication lasts a second here, and is waited out: timing matters, so it runs alone.
	b := saslBroker(t, "SASL_PLAINTEXT", func(c *config.Broker) { c.ConnectionsMaxReauth = time.Second })
	auth := func(c *rawConn, user string) *kmsg.SASLAuthenticateResponse {
		t.Helper()
		hs := kmsg.NewPtrSASLHandshakeRequest()
		hs.SetVersion(1)
		hs.Mechanism = "PLAIN"
		if r := c.do(hs).(*kmsg.SASLHandshakeResponse); r.ErrorCode != 0 {
			t.Fatalf("handshake: %d", r.ErrorCode)
		}
		a := kmsg.NewPtrSASLAuthenticateRequest()
		a.SetVersion(2)
		a.SASLAuthBytes = []byte("\x00" + user + "\x00alice-secret")
		return c.do(a).(*kmsg.SASLAuthenticateResponse)
	}
	meta := func(c *rawConn) { c.do(kmsg.NewPtrMetadataRequest()) }

	stale := dialRaw(t, b.Addr)
	if r := auth(stale, "alice"); r.ErrorCode != 0 || r.SessionLifetimeMillis != 1000 {
		t.Fatalf("authenticate: error %d, session lifetime %d ms", r.ErrorCode, r.SessionLifetimeMillis)
	}
	meta(stale)
	fresh := dialRaw(t, b.Addr)
	auth(fresh, "alice")
	time.Sleep(600 * time.Millisecond)
	if r := auth(fresh, "alice"); r.ErrorCode != 0 {
		t.Fatalf("re-authenticate: %d", r.ErrorCode)
	}
	time.Sleep(600 * time.Millisecond)
	meta(fresh) // 1.2 s after the first authentication, 0.6 s after the second
	stale.write(func() []byte { f, _ := stale.frame(kmsg.NewPtrMetadataRequest()); return f }())
	stale.expectClosed()

	// Another user's password is right, yet the principal may not change.
	bob, _ := scram.SHA512.NewCredential("alice-secret", 4096)
	if err := b.Server().Metadata().AlterScramCredentials([]cluster.ScramCredentialChange{{User: "bob",
		Mechanism: int8(scram.SHA512), Credential: cluster.ScramCredential(bob)}}, nil); err != nil {
		t.Fatal(err)
	}
	other := dialRaw(t, b.Addr)
	auth(other, "alice")
	if r := auth(other, "bob"); r.ErrorCode == 0 || !strings.Contains(*r.ErrorMessage, "Cannot change principals") {
		t.Fatalf("a re-authentication as another user: %d %v", r.ErrorCode, r.ErrorMessage)
	}

	// franz-go re-authenticates by itself within the session's lifetime.
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.SASL(kscram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism()),
		kgo.DefaultProduceTopic("reauth"), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for range 12 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatalf("producing across re-authentications: %v", err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// TestOAuthBearer: a token signed with a key of the JWKS authenticates,
// and its subject is the principal the ACLs name; an expired token, one
// signed with another key, one for another audience and an unsecured one
// are refused; the session lasts no longer than the token.
func TestOAuthBearer(t *testing.T) {
	iss := testutil.NewIssuer(t, "key-1")
	other := testutil.NewIssuer(t, "key-1")
	b := saslBroker(t, "SASL_PLAINTEXT", func(c *config.Broker) {
		c.SASLMechanisms = []string{"OAUTHBEARER", "SCRAM-SHA-512"}
		c.OAuthJWKS, c.OAuthAudience = "file://"+iss.JWKS, []string{"strand"}
		c.ConnectionsMaxReauth = time.Hour
		c.Authorizer = "acl"
	})
	claims := func(edit func(map[string]any)) map[string]any {
		c := map[string]any{"sub": "svc-orders", "aud": "strand", "exp": time.Now().Add(time.Hour).Unix()}
		if edit != nil {
			edit(c)
		}
		return c
	}
	bearer := func(token string) sasl.Mechanism { return oauth.Auth{Token: token}.AsMechanism() }
	if err := saslPing(t, b.Addr, bearer(iss.Token(t, claims(nil)))); err != nil {
		t.Fatalf("a good token: %v", err)
	}
	for name, token := range map[string]string{
		"expired":          iss.Token(t, claims(func(c map[string]any) { c["exp"] = time.Now().Add(-time.Hour).Unix() })),
		"another key":      other.Token(t, claims(nil)),
		"another audience": iss.Token(t, claims(func(c map[string]any) { c["aud"] = "elsewhere" })),
		"unsecured":        testutil.UnsecuredToken(claims(nil)),
	} {
		if err := saslPing(t, b.Addr, bearer(token)); !errors.Is(err, kerr.SaslAuthenticationFailed) {
			t.Errorf("%s: %v, want SASL_AUTHENTICATION_FAILED", name, err)
		}
	}

	// The principal is the token's subject.
	md := b.Server().Metadata()
	if _, err := md.CreateTopic(cluster.TopicSpec{Name: "orders", Partitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	produce := func() int16 {
		cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.SASL(bearer(iss.Token(t, claims(nil)))), kgo.RequestRetries(0))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := cl.Broker(int(b.Config.NodeID)).Request(ctx, produceOne("orders"))
		if err != nil {
			t.Fatal(err)
		}
		return resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode
	}
	if code := produce(); code != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("without an ACL: %s", codeName(code))
	}
	grant := allowACL(aclTopic, "orders", kmsg.ACLOperationWrite)
	grant.Principal = "User:svc-orders"
	setACLs(t, md, []model.ACLBinding{grant})
	if code := produce(); code != 0 {
		t.Fatalf("with an ACL for the token's subject: %s", codeName(code))
	}

	// A token ending in a minute makes a session of at most a minute.
	raw := dialRaw(t, b.Addr)
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Mechanism = "OAUTHBEARER"
	hs.SetVersion(1)
	if r := raw.do(hs).(*kmsg.SASLHandshakeResponse); r.ErrorCode != 0 {
		t.Fatalf("handshake: %+v", r)
	}
	auth := kmsg.NewPtrSASLAuthenticateRequest()
	auth.SetVersion(2)
	auth.SASLAuthBytes = []byte("n,,\x01auth=Bearer " + iss.Token(t, claims(func(c map[string]any) { c["exp"] = time.Now().Add(time.Minute).Unix() })) + "\x01\x01")
	r := raw.do(auth).(*kmsg.SASLAuthenticateResponse)
	if r.ErrorCode != 0 || r.SessionLifetimeMillis <= 0 || r.SessionLifetimeMillis > time.Minute.Milliseconds() {
		t.Fatalf("session lifetime %d ms for a token of a minute (error %d)", r.SessionLifetimeMillis, r.ErrorCode)
	}
}
