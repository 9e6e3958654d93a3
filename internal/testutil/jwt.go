package testutil

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"os"
	"path/filepath"
	"testing"
)

// Issuer signs JWTs with an RSA key (RS256) whose JWKS it writes to a
// file, as an OAuth provider would publish it.
type Issuer struct {
	Kid  string
	JWKS string // the JWKS file's path
	key  *rsa.PrivateKey
}

// NewIssuer makes a key and writes its JWKS under the test's temporary
// directory.
func NewIssuer(t testing.TB, kid string) *Issuer {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	enc := base64.RawURLEncoding.EncodeToString
	jwks, _ := json.Marshal(map[string]any{"keys": []map[string]string{{"kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256",
		"n": enc(k.N.Bytes()), "e": enc(big.NewInt(int64(k.E)).Bytes())}}})
	path := filepath.Join(t.TempDir(), kid+"-jwks.json")
	if err := os.WriteFile(path, jwks, 0o600); err != nil {
		t.Fatal(err)
	}
	return &Issuer{Kid: kid, JWKS: path, key: k}
}

// Token signs claims.
func (i *Issuer) Token(t testing.TB, claims map[string]any) string {
	t.Helper()
	signed := jwtPart(map[string]any{"alg": "RS256", "typ": "JWT", "kid": i.Kid}) + "." + jwtPart(claims)
	digest := sha256.Sum256([]byte(signed))
	sig, err := rsa.SignPKCS1v15(rand.Reader, i.key, crypto.SHA256, digest[:])
	if err != nil {
		t.Fatal(err)
	}
	return signed + "." + base64.RawURLEncoding.EncodeToString(sig)
}

// UnsecuredToken is claims signed with nothing (alg none), as Kafka's
// and librdkafka's unsecured tokens are.
func UnsecuredToken(claims map[string]any) string {
	return jwtPart(map[string]any{"alg": "none"}) + "." + jwtPart(claims) + "."
}

func jwtPart(v any) string {
	b, _ := json.Marshal(v)
	return base64.RawURLEncoding.EncodeToString(b)
}
