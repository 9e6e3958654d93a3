package scram

import (
	"encoding/base64"
	"testing"
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
