package oauth

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	_ "crypto/sha256" // the hashes the algorithms name
	_ "crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
)

// ErrInvalidToken is the kind of every refusal: a bad message, token,
// signature or claim.
var ErrInvalidToken = errors.New("invalid token")

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidToken, fmt.Sprintf(format, args...))
}

// Config is what a token is validated against.
type Config struct {
	// Keys are the verification keys by key id (a JWKS's); KeyFile, when
	// set, gives them instead, read again when the file changes.
	Keys    map[string]crypto.PublicKey
	KeyFile *JWKSFile
	// Audience, when set, must be among the token's aud; Issuer, when
	// set, its iss.
	Audience []string
	Issuer   string
	// SubClaim names the claim of the principal (sub by default).
	SubClaim string
	// ClockSkew is allowed on exp, nbf and iat (Kafka's 30 s).
	ClockSkew time.Duration
	// AllowUnsecured accepts tokens signed with nothing (alg none), as
	// Kafka's unsecured validator does: for development only.
	AllowUnsecured bool
}

// Token is a validated token's principal name and expiry.
type Token struct {
	Principal string
	Expires   time.Time
}

// ParseMessage reads the client's first message (RFC 7628 section 3.1):
// a GS2 header, then key=value pairs separated by 0x01, among them
// auth=Bearer <token>, ended by two 0x01. It returns the token and the
// other pairs (SASL extensions).
func ParseMessage(msg []byte) (string, map[string]string, error) {
	header, rest, ok := bytes.Cut(msg, []byte{1})
	if !ok || !bytes.HasPrefix(header, []byte("n,")) && !bytes.HasPrefix(header, []byte("y,")) {
		return "", nil, invalid("no GS2 header")
	}
	if !bytes.HasSuffix(rest, []byte{1}) {
		return "", nil, invalid("message not ended by 0x01 0x01")
	}
	token := ""
	ext := map[string]string{}
	for _, kv := range bytes.Split(bytes.TrimSuffix(rest, []byte{1}), []byte{1}) {
		if len(kv) == 0 {
			continue
		}
		k, v, ok := bytes.Cut(kv, []byte("="))
		if !ok {
			return "", nil, invalid("a key without a value")
		}
		if string(k) == "auth" {
			scheme, t, ok := strings.Cut(string(v), " ")
			if !ok || !strings.EqualFold(scheme, "Bearer") || t == "" {
				return "", nil, invalid("auth is not a bearer token")
			}
			token = t
			continue
		}
		ext[string(k)] = string(v)
	}
	if token == "" {
		return "", nil, invalid("no auth=Bearer token")
	}
	return token, ext, nil
}

// Validate checks a compact JWS token at now and returns its principal
// and expiry.
func (c Config) Validate(token string, now time.Time) (Token, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return Token{}, invalid("not a JWS compact token")
	}
	var header struct {
		Alg string `json:"alg"`
		Kid string `json:"kid"`
	}
	if err := decodePart(parts[0], &header); err != nil {
		return Token{}, err
	}
	var claims map[string]any
	if err := decodePart(parts[1], &claims); err != nil {
		return Token{}, err
	}
	if header.Alg == "none" {
		if !c.AllowUnsecured {
			return Token{}, invalid("unsecured tokens are not accepted")
		}
	} else if err := c.verify(header.Alg, header.Kid, parts[0]+"."+parts[1], parts[2], now); err != nil {
		return Token{}, err
	}
	return c.checkClaims(claims, now)
}

func (c Config) checkClaims(claims map[string]any, now time.Time) (Token, error) {
	skew := c.ClockSkew
	exp, ok := numericDate(claims["exp"])
	if !ok {
		return Token{}, invalid("no exp claim")
	}
	if now.After(exp.Add(skew)) {
		return Token{}, invalid("the token expired at %s", exp.UTC().Format(time.RFC3339))
	}
	if nbf, ok := numericDate(claims["nbf"]); ok && now.Add(skew).Before(nbf) {
		return Token{}, invalid("the token is not valid before %s", nbf.UTC().Format(time.RFC3339))
	}
	if iat, ok := numericDate(claims["iat"]); ok && now.Add(skew).Before(iat) {
		return Token{}, invalid("the token was issued in the future")
	}
	if c.Issuer != "" && claims["iss"] != c.Issuer {
		return Token{}, invalid("issuer %v, want %s", claims["iss"], c.Issuer)
	}
	if len(c.Audience) > 0 {
		var aud []string
		switch a := claims["aud"].(type) {
		case string:
			aud = []string{a}
		case []any:
			for _, x := range a {
				if s, ok := x.(string); ok {
					aud = append(aud, s)
				}
			}
		}
		if !slices.ContainsFunc(aud, func(a string) bool { return slices.Contains(c.Audience, a) }) {
			return Token{}, invalid("audience %v is not among %v", aud, c.Audience)
		}
	}
	claim := c.SubClaim
	if claim == "" {
		claim = "sub"
	}
	sub, _ := claims[claim].(string)
	if sub == "" {
		return Token{}, invalid("no %s claim", claim)
	}
	return Token{Principal: sub, Expires: exp}, nil
}

func numericDate(v any) (time.Time, bool) {
	f, ok := v.(float64)
	if !ok {
		return time.Time{}, false
	}
	sec := int64(f)
	return time.Unix(sec, int64((f-float64(sec))*1e9)), true
}

func decodePart(s string, into any) error {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return invalid("bad base64url")
	}
	if err := json.Unmarshal(b, into); err != nil {
		return invalid("bad JSON")
	}
	return nil
}

// algs are the signature algorithms served: the key type, hash and, for
// RSA, whether PSS.
var algs = map[string]struct {
	hash crypto.Hash
	ec   bool
	pss  bool
}{
	"RS256": {hash: crypto.SHA256}, "RS384": {hash: crypto.SHA384}, "RS512": {hash: crypto.SHA512},
	"PS256": {hash: crypto.SHA256, pss: true}, "PS384": {hash: crypto.SHA384, pss: true}, "PS512": {hash: crypto.SHA512, pss: true},
	"ES256": {hash: crypto.SHA256, ec: true}, "ES384": {hash: crypto.SHA384, ec: true}, "ES512": {hash: crypto.SHA512, ec: true},
}

func (c Config) verify(alg, kid, signed, sig64 string, now time.Time) error {
	a, ok := algs[alg]
	if !ok {
		return invalid("algorithm %q is not served", alg)
	}
	keys := c.Keys
	if c.KeyFile != nil {
		keys = c.KeyFile.Current(now)
	}
	key, ok := keys[kid]
	if !ok && kid == "" && len(keys) == 1 {
		for _, k := range keys {
			key, ok = k, true
		}
	}
	if !ok {
		return invalid("no key %q", kid)
	}
	sig, err := base64.RawURLEncoding.DecodeString(sig64)
	if err != nil {
		return invalid("bad signature encoding")
	}
	h := a.hash.New()
	h.Write([]byte(signed))
	digest := h.Sum(nil)
	switch k := key.(type) {
	case *rsa.PublicKey:
		if a.ec {
			return invalid("key %q is RSA, the token %s", kid, alg)
		}
		if a.pss {
			err = rsa.VerifyPSS(k, a.hash, digest, sig, nil)
		} else {
			err = rsa.VerifyPKCS1v15(k, a.hash, digest, sig)
		}
		if err != nil {
			return invalid("bad signature")
		}
	case *ecdsa.PublicKey:
		size := (k.Curve.Params().BitSize + 7) / 8
		if !a.ec || len(sig) != 2*size {
			return invalid("bad signature")
		}
		r, s := new(big.Int).SetBytes(sig[:size]), new(big.Int).SetBytes(sig[size:])
		if !ecdsa.Verify(k, digest, r, s) {
			return invalid("bad signature")
		}
	default:
		return invalid("key %q of an unknown type", kid)
	}
	return nil
}

// JWKSFile is a JWKS file whose keys are read again when it changes
// (looked at once a second at most), so keys rotate without a restart.
type JWKSFile struct {
	path string

	mu      sync.Mutex
	keys    map[string]crypto.PublicKey
	mod     time.Time
	size    int64
	checked time.Time
}

// OpenJWKS reads a JWKS file (a path, or a file: URL as Kafka's
// sasl.oauthbearer.jwks.endpoint.url takes it).
func OpenJWKS(location string) (*JWKSFile, error) {
	f := &JWKSFile{path: strings.TrimPrefix(strings.TrimPrefix(location, "file://"), "file:")}
	fi, err := os.Stat(f.path)
	if err != nil {
		return nil, err
	}
	keys, err := LoadJWKS(f.path)
	if err != nil {
		return nil, err
	}
	f.keys, f.mod, f.size, f.checked = keys, fi.ModTime(), fi.Size(), time.Now()
	return f, nil
}

// Current returns the file's keys, read again if it changed since. A file
// that no longer reads as a JWKS leaves the keys it last had.
func (f *JWKSFile) Current(now time.Time) map[string]crypto.PublicKey {
	f.mu.Lock()
	defer f.mu.Unlock()
	if now.Sub(f.checked) < time.Second {
		return f.keys
	}
	f.checked = now
	fi, err := os.Stat(f.path)
	if err != nil || (fi.ModTime().Equal(f.mod) && fi.Size() == f.size) {
		return f.keys
	}
	if keys, err := LoadJWKS(f.path); err == nil {
		f.keys, f.mod, f.size = keys, fi.ModTime(), fi.Size()
	}
	return f.keys
}

// LoadJWKS reads the verification keys of a JWKS file (a path, or a
// file: URL as Kafka's sasl.oauthbearer.jwks.endpoint.url takes it).
func LoadJWKS(location string) (map[string]crypto.PublicKey, error) {
	path := strings.TrimPrefix(strings.TrimPrefix(location, "file://"), "file:")
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseJWKS(b)
}

// ParseJWKS reads the RSA and EC keys of a JSON Web Key Set.
func ParseJWKS(b []byte) (map[string]crypto.PublicKey, error) {
	var set struct {
		Keys []struct {
			Kty, Kid, Use, N, E, Crv, X, Y string
		} `json:"keys"`
	}
	if err := json.Unmarshal(b, &set); err != nil {
		return nil, fmt.Errorf("JWKS: %w", err)
	}
	num := func(s string) (*big.Int, error) {
		b, err := base64.RawURLEncoding.DecodeString(s)
		if err != nil || len(b) == 0 {
			return nil, errors.New("bad base64url number")
		}
		return new(big.Int).SetBytes(b), nil
	}
	keys := map[string]crypto.PublicKey{}
	for _, k := range set.Keys {
		if k.Use != "" && k.Use != "sig" {
			continue
		}
		switch k.Kty {
		case "RSA":
			n, err := num(k.N)
			if err != nil {
				return nil, fmt.Errorf("JWKS key %q: %w", k.Kid, err)
			}
			e, err := num(k.E)
			if err != nil || !e.IsInt64() {
				return nil, fmt.Errorf("JWKS key %q: bad exponent", k.Kid)
			}
			keys[k.Kid] = &rsa.PublicKey{N: n, E: int(e.Int64())}
		case "EC":
			curve := map[string]elliptic.Curve{"P-256": elliptic.P256(), "P-384": elliptic.P384(), "P-521": elliptic.P521()}[k.Crv]
			x, errX := num(k.X)
			y, errY := num(k.Y)
			if curve == nil || errX != nil || errY != nil || !curve.IsOnCurve(x, y) {
				return nil, fmt.Errorf("JWKS key %q: bad EC key", k.Kid)
			}
			keys[k.Kid] = &ecdsa.PublicKey{Curve: curve, X: x, Y: y}
		}
	}
	if len(keys) == 0 {
		return nil, errors.New("JWKS: no signing key")
	}
	return keys, nil
}
