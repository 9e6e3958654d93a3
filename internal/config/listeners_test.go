package config

import (
	"reflect"
	"strings"
	"testing"
)

// Kafka's listener settings name each listener, map names to security
// protocols and advertise per listener; the controller's listener is the
// metadata quorum's.
func TestApplyListeners(t *testing.T) {
	b := Defaults()
	err := ApplyListeners(&b, "client://0.0.0.0:9092, INTERNAL://10.0.0.5:9093,CONTROLLER://10.0.0.5:9094",
		"CLIENT://kafka-1.example:9092", "CLIENT:SASL_SSL,INTERNAL:SSL")
	if err != nil {
		t.Fatal(err)
	}
	want := []Listener{
		{Name: "CLIENT", Protocol: "SASL_SSL", Addr: "0.0.0.0:9092", Advertise: "kafka-1.example:9092"},
		{Name: "INTERNAL", Protocol: "SSL", Addr: "10.0.0.5:9093"},
	}
	if got := b.Listeners(); !reflect.DeepEqual(got, want) {
		t.Fatalf("listeners %+v\nwant %+v", got, want)
	}
	if b.ControllerListen != "10.0.0.5:9094" {
		t.Fatalf("controller listener %q", b.ControllerListen)
	}
	b.InterBrokerListener = "internal"
	if ib := b.InterBroker(); ib.Name != "INTERNAL" || !ib.TLS() || ib.SASL() {
		t.Fatalf("inter-broker listener %+v", ib)
	}
	if !b.UsesTLS() || !b.UsesSASL() {
		t.Fatalf("UsesTLS %v UsesSASL %v", b.UsesTLS(), b.UsesSASL())
	}
	for name, v := range map[string]string{
		"listeners":                      "CLIENT://0.0.0.0:9092,INTERNAL://10.0.0.5:9093,CONTROLLER://10.0.0.5:9094",
		"advertised.listeners":           "CLIENT://kafka-1.example:9092,INTERNAL://10.0.0.5:9093",
		"listener.security.protocol.map": "CLIENT:SASL_SSL,INTERNAL:SSL,CONTROLLER:PLAINTEXT",
		"security.protocol":              "SASL_SSL",
	} {
		d, _ := LookupBrokerDef(name)
		if got := d.Get(b); got != v {
			t.Errorf("%s = %q, want %q", name, got, v)
		}
	}

	// The map gives the controller listener's protocol too.
	b = Defaults()
	b.QuorumVoters = "0@10.0.0.5:9094"
	if err := ApplyListeners(&b, "PLAINTEXT://10.0.0.5:9092,CONTROLLER://10.0.0.5:9094", "", "CONTROLLER:SSL"); err != nil {
		t.Fatal(err)
	}
	if !b.ControllerTLS() || !b.UsesTLS() {
		t.Fatalf("controller protocol %q", b.ControllerProtocol)
	}
	if d, _ := LookupBrokerDef("listener.security.protocol.map"); d.Get(b) != "PLAINTEXT:PLAINTEXT,CONTROLLER:SSL" {
		t.Fatalf("listener.security.protocol.map = %q", d.Get(b))
	}

	// A listener named after its protocol needs no map entry.
	b = Defaults()
	if err := ApplyListeners(&b, "SSL://127.0.0.1:9093,PLAINTEXT://127.0.0.1:9092", "", ""); err != nil {
		t.Fatal(err)
	}
	if ls := b.Listeners(); len(ls) != 2 || ls[0].Protocol != "SSL" || ls[1].Protocol != "PLAINTEXT" {
		t.Fatalf("listeners %+v", ls)
	}
	if b.InterBroker().Name != "SSL" {
		t.Fatalf("the inter-broker listener defaults to the first: %+v", b.InterBroker())
	}
}

func TestApplyListenersRefuses(t *testing.T) {
	for _, c := range []struct{ listeners, advertised, protocols, want string }{
		{"CLIENT://127.0.0.1:9092", "", "", "listener CLIENT has no security protocol"},
		{"PLAINTEXT://127.0.0.1:9092,PLAINTEXT://127.0.0.1:9093", "", "", "named twice"},
		{"PLAINTEXT://127.0.0.1", "", "", "missing port"},
		{"PLAINTEXT:/127.0.0.1:9092", "", "", "is not NAME://host:port"},
		{"PLAINTEXT://127.0.0.1:9092", "OTHER://x:1", "", "OTHER is not a listener"},
		{"CLIENT://127.0.0.1:9092", "", "CLIENT:TLS", "is not NAME:PROTOCOL"},
	} {
		b := Defaults()
		err := ApplyListeners(&b, c.listeners, c.advertised, c.protocols)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q %q %q: %v, want %q", c.listeners, c.advertised, c.protocols, err, c.want)
		}
	}
}

// In a cluster, an inter-broker listener with SASL needs the user brokers
// authenticate to each other as, by a mechanism the listeners offer.
func TestValidateInterBroker(t *testing.T) {
	cluster := func(edit func(b *Broker)) error {
		b := Defaults()
		b.DataDir, b.QuorumVoters, b.ControllerListen = "/data", "0@127.0.0.1:9094", "127.0.0.1:9094"
		if err := ApplyListeners(&b, "SASL_SSL://127.0.0.1:9092,INTERNAL://127.0.0.1:9093", "", "INTERNAL:SASL_PLAINTEXT"); err != nil {
			t.Fatal(err)
		}
		b.SSLKeystore, b.SASLMechanisms, b.InterBrokerListener = "/etc/server.pem", []string{"SCRAM-SHA-256"}, "INTERNAL"
		edit(&b)
		return b.Validate()
	}
	for _, c := range []struct {
		edit func(b *Broker)
		want string
	}{
		{func(*Broker) {}, "inter.broker.sasl.username and inter.broker.sasl.password"},
		{func(b *Broker) { b.InterBrokerSASLUser, b.InterBrokerSASLPassword = "broker", "pw" }, ""},
		{func(b *Broker) {
			b.InterBrokerSASLUser, b.InterBrokerSASLPassword, b.InterBrokerSASLMechanism = "broker", "pw", "SCRAM-SHA-512"
		}, "not among sasl.enabled.mechanisms"},
		{func(b *Broker) {
			b.InterBrokerSASLUser, b.InterBrokerSASLPassword, b.InterBrokerSASLMechanism = "broker", "pw", "OAUTHBEARER"
		}, "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512"},
		{func(b *Broker) { b.InterBrokerListener = "REPLICATION" }, "not a listener"},
		{func(b *Broker) { b.ListenerName = "CONTROLLER" }, "is a controller listener"},
		// The quorum's traffic is PLAINTEXT or mutual TLS.
		{func(b *Broker) {
			b.InterBrokerSASLUser, b.InterBrokerSASLPassword, b.ControllerProtocol = "broker", "pw", "SASL_SSL"
		}, "PLAINTEXT or SSL (mutual TLS), not SASL_SSL"},
		{func(b *Broker) {
			b.InterBrokerSASLUser, b.InterBrokerSASLPassword, b.ControllerProtocol = "broker", "pw", "SSL"
		}, "needs ssl.keystore.location and ssl.truststore.location"},
		{func(b *Broker) {
			b.InterBrokerSASLUser, b.InterBrokerSASLPassword, b.ControllerProtocol = "broker", "pw", "SSL"
			b.SSLTruststore = "/etc/ca.pem"
		}, ""},
	} {
		err := cluster(c.edit)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("refused: %v", err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%v, want %q", err, c.want)
		}
	}
}
