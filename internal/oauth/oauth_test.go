package oauth_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/strandlog/strand/internal/oauth"
	"github.com/strandlog/strand/internal/testutil"
)

func TestValidate(t *testing.T) {
	iss := testutil.NewIssuer(t, "k1")
	other := testutil.NewIssuer(t, "k1") // same key id, another key
	keys, err := oauth.LoadJWKS("file://" + iss.JWKS)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_800_000_000, 0)
	cfg := oauth.Config{Keys: keys, Audience: []string{"strand"}, Issuer: "https://idp", ClockSkew: 30 * time.Second}
	claims := func(edit func(map[string]any)) map[string]any {
		c := map[string]any{"sub": "alice", "exp": now.Add(time.Hour).Unix(), "iat": now.Unix(), "aud": []string{"other", "strand"},
			"iss": "https://idp"}
		if edit != nil {
			edit(c)
		}
		return c
	}
	tok, err := cfg.Validate(iss.Token(t, claims(nil)), now)
	if err != nil || tok.Principal != "alice" || !tok.Expires.Equal(now.Add(time.Hour)) {
		t.Fatalf("a good token: %+v %v", tok, err)
	}
	for name, token := range map[string]string{
		"expired":           iss.Token(t, claims(func(c map[string]any) { c["exp"] = now.Add(-time.Minute).Unix() })),
		"not yet valid":     iss.Token(t, claims(func(c map[string]any) { c["nbf"] = now.Add(time.Minute).Unix() })),
		"no exp":            iss.Token(t, claims(func(c map[string]any) { delete(c, "exp") })),
		"another audience":  iss.Token(t, claims(func(c map[string]any) { c["aud"] = "else" })),
		"another issuer":    iss.Token(t, claims(func(c map[string]any) { c["iss"] = "https://evil" })),
		"no subject":        iss.Token(t, claims(func(c map[string]any) { delete(c, "sub") })),
		"signed by another": other.Token(t, claims(nil)),
		"unsecured":         testutil.UnsecuredToken(claims(nil)),
		"not a JWT":         "abc",
		"tampered":          iss.Token(t, claims(nil))[:40] + "x" + iss.Token(t, claims(nil))[41:],
	} {
		if _, err := cfg.Validate(token, now); !errors.Is(err, oauth.ErrInvalidToken) {
			t.Errorf("%s: %v", name, err)
		}
	}
	// Within the clock skew an expired token still passes.
	if _, err := cfg.Validate(iss.Token(t, claims(func(c map[string]any) { c["exp"] = now.Add(-10 * time.Second).Unix() })), now); err != nil {
		t.Errorf("expired 10 s ago, with 30 s of skew: %v", err)
	}
	cfg.AllowUnsecured = true
	if tok, err := cfg.Validate(testutil.UnsecuredToken(claims(nil)), now); err != nil || tok.Principal != "alice" {
		t.Errorf("unsecured, allowed: %+v %v", tok, err)
	}
}

func TestParseMessage(t *testing.T) {
	token, ext, err := oauth.ParseMessage([]byte("n,,\x01auth=Bearer abc.def.ghi\x01traceId=42\x01\x01"))
	if err != nil || token != "abc.def.ghi" || ext["traceId"] != "42" {
		t.Fatalf("%q %v %v", token, ext, err)
	}
	for _, bad := range []string{"", "auth=Bearer x\x01\x01", "n,,\x01auth=Bearer x", "n,,\x01auth=Basic x\x01\x01",
		"n,,\x01\x01", "n,,\x01novalue\x01\x01"} {
		if _, _, err := oauth.ParseMessage([]byte(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func FuzzParseMessage(f *testing.F) {
	f.Add([]byte("n,,\x01auth=Bearer abc.def.ghi\x01\x01"))
	f.Add([]byte("y,a=alice,\x01auth=Bearer e30.e30.\x01x=y\x01\x01"))
	cfg := oauth.Config{AllowUnsecured: true}
	f.Fuzz(func(t *testing.T, msg []byte) {
		token, _, err := oauth.ParseMessage(msg)
		if err == nil {
			cfg.Validate(token, time.Now())
		}
	})
}

// A rotated JWKS file is read again: tokens of the new key pass, the old
// key's no longer do.
func TestJWKSRotation(t *testing.T) {
	old, next := testutil.NewIssuer(t, "old"), testutil.NewIssuer(t, "new")
	b, err := os.ReadFile(old.JWKS)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := oauth.OpenJWKS(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg := oauth.Config{KeyFile: f}
	claims := map[string]any{"sub": "alice", "exp": time.Now().Add(time.Hour).Unix()}
	if _, err := cfg.Validate(old.Token(t, claims), time.Now()); err != nil {
		t.Fatalf("the old key before the rotation: %v", err)
	}
	nb, err := os.ReadFile(next.JWKS)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, nb, 0o600); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(2 * time.Second)
	if f.Current(later)["new"] == nil {
		t.Fatal("the rotated file was not read again")
	}
	if _, err := cfg.Validate(next.Token(t, claims), later); err != nil {
		t.Fatalf("the new key after the rotation: %v", err)
	}
	if _, err := cfg.Validate(old.Token(t, claims), later); err == nil {
		t.Fatal("the old key still passes after the rotation")
	}
	// A broken file keeps the keys the last good one had.
	if err := os.WriteFile(path, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if f.Current(later.Add(2 * time.Second))["new"] == nil {
		t.Fatal("a broken JWKS file dropped the keys")
	}
}
