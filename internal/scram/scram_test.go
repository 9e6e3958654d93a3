package scram

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"

	kscram "github.com/twmb/franz-go/pkg/sasl/scram"
)

// TestRFC7677Vector: the stored and server keys of RFC 7677's example
// (user "user", password "pencil", SCRAM-SHA-256).
func TestRFC7677Vector(t *testing.T) {
	salt, _ := base64.StdEncoding.DecodeString("W22ZaJ0SNY7soEsUEjb6gQ==")
	salted, err := SHA256.SaltedPassword("pencil", salt, 4096)
	if err != nil {
		t.Fatal(err)
	}
	c := SHA256.FromSaltedPassword(salted, salt, 4096)
	// From the exchange in RFC 7677 section 3: ServerSignature =
	// HMAC(ServerKey, AuthMessage) is "6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=".
	auth := "n=user,r=rOprNGfwEbeRWgbNEkqO,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096,c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
	sig := base64.StdEncoding.EncodeToString(mac(SHA256.hash(), c.ServerKey, auth))
	if sig != "6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=" {
		t.Fatalf("server signature %s", sig)
	}
	if m, err := ParseMechanism("SCRAM-SHA-512"); err != nil || m != SHA512 || m.String() != "SCRAM-SHA-512" {
		t.Fatalf("%v %v", m, err)
	}
	if _, err := ParseMechanism("PLAIN"); err == nil {
		t.Fatal("PLAIN parsed as SCRAM")
	}
	n, err := SHA512.NewCredential("secret", 8192)
	if err != nil || len(n.Salt) != 32 || len(n.StoredKey) != 64 || len(n.ServerKey) != 64 || n.Iterations != 8192 {
		t.Fatalf("%+v %v", n, err)
	}
}

// TestServerAgainstFranzGo: an exchange with franz-go's SCRAM client
// succeeds with the right password and fails with a wrong one.
func TestServerAgainstFranzGo(t *testing.T) {
	for _, m := range []Mechanism{SHA256, SHA512} {
		cred, err := m.NewCredential("pencil", 4096)
		if err != nil {
			t.Fatal(err)
		}
		lookup := func(u string) (Credential, bool) { return cred, u == "user,=odd" }
		for password, ok := range map[string]bool{"pencil": true, "wrong": false} {
			auth := kscram.Auth{User: "user,=odd", Pass: password}
			mechanism := kscram.Sha256(func(context.Context) (kscram.Auth, error) { return auth, nil })
			if m == SHA512 {
				mechanism = kscram.Sha512(func(context.Context) (kscram.Auth, error) { return auth, nil })
			}
			sess, first, err := mechanism.Authenticate(context.Background(), "broker")
			if err != nil {
				t.Fatal(err)
			}
			srv := m.NewServer(lookup)
			msg := first
			for {
				answer, done, err := srv.Step(msg)
				if err != nil {
					if ok {
						t.Fatalf("%s with the right password: %v", m, err)
					}
					break
				}
				if !ok && done {
					t.Fatalf("%s with a wrong password: accepted", m)
				}
				clientDone, next, err := sess.Challenge(answer)
				if err != nil {
					t.Fatalf("%s: the client refused the server: %v", m, err)
				}
				if done || clientDone {
					if !(done && clientDone) {
						t.Fatalf("%s: server done %v, client done %v", m, done, clientDone)
					}
					break
				}
				msg = next
			}
			if ok && srv.User() != "user,=odd" {
				t.Fatalf("user %q", srv.User())
			}
		}
		if !m.Verify("pencil", cred) || m.Verify("pencil ", cred) {
			t.Fatalf("%s: Verify", m)
		}
	}
}

// TestServerTakesLibrdkafkaNonce: librdkafka sends its nonce before the
// server's full nonce in its final message; Kafka accepts it, so must the
// server. A final message whose nonce does not end with the server's is
// refused.
func TestServerTakesLibrdkafkaNonce(t *testing.T) {
	cred, _ := SHA256.NewCredential("pencil", 4096)
	for prefix, ok := range map[string]bool{"cnonce": true, "": true, "x": false} {
		srv := SHA256.NewServer(func(string) (Credential, bool) { return cred, true })
		first, _, err := srv.Step([]byte("n,,n=user,r=cnonce"))
		if err != nil {
			t.Fatal(err)
		}
		full := strings.TrimPrefix(strings.Split(string(first), ",")[0], "r=")
		nonce := prefix + full
		if !ok {
			// Another last character: the server's nonce may end with "x".
			last := "x"
			if strings.HasSuffix(full, last) {
				last = "y"
			}
			nonce = full[:len(full)-1] + last
		}
		withoutProof := "c=biws,r=" + nonce
		salted, _ := SHA256.SaltedPassword("pencil", cred.Salt, cred.Iterations)
		clientKey := mac(SHA256.hash(), salted, "Client Key")
		sig := mac(SHA256.hash(), cred.StoredKey, "n=user,r=cnonce,"+string(first)+","+withoutProof)
		proof := make([]byte, len(clientKey))
		for i := range proof {
			proof[i] = clientKey[i] ^ sig[i]
		}
		_, done, err := srv.Step([]byte(withoutProof + ",p=" + base64.StdEncoding.EncodeToString(proof)))
		if (err == nil) != ok || !done {
			t.Errorf("nonce %q: %v, want accepted %v", prefix, err, ok)
		}
	}
}
