package scram

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrAuthentication is a failed exchange: a bad proof, an unknown user, or
// a message out of the protocol.
var ErrAuthentication = errors.New("authentication failed")

// Server is one SCRAM exchange on the broker's side (RFC 5802 section 3):
// the client's first message is answered with the salt and iterations of
// the user's credential, the client's final message is checked against the
// stored key and answered with the server's signature. Channel binding is
// not served.
type Server struct {
	mech   Mechanism
	lookup func(user string) (Credential, bool)
	step   int

	user, gs2, clientFirstBare, serverFirst, nonce string
	cred                                           Credential
}

// NewServer starts an exchange that finds users' credentials with lookup.
func (m Mechanism) NewServer(lookup func(user string) (Credential, bool)) *Server {
	return &Server{mech: m, lookup: lookup}
}

// User is who the exchange authenticated (or is authenticating).
func (s *Server) User() string { return s.user }

// Step takes the client's next message and gives the server's answer;
// done is true when the exchange is over, successfully when err is nil.
func (s *Server) Step(msg []byte) (answer []byte, done bool, err error) {
	switch s.step {
	case 0:
		s.step = 1
		a, err := s.first(string(msg))
		return a, err != nil, err
	case 1:
		s.step = 2
		a, err := s.final(string(msg))
		return a, true, err
	}
	return nil, true, fmt.Errorf("%w: the exchange is over", ErrAuthentication)
}

func (s *Server) first(msg string) ([]byte, error) {
	// gs2-header: a channel binding flag and an optional authzid, then
	// the bare message: n=user,r=nonce[,extensions].
	flag, rest, ok := strings.Cut(msg, ",")
	if !ok || (flag != "n" && flag != "y") {
		return nil, fmt.Errorf("%w: channel binding is not served", ErrAuthentication)
	}
	authz, bare, ok := strings.Cut(rest, ",")
	if !ok || (authz != "" && !strings.HasPrefix(authz, "a=")) {
		return nil, fmt.Errorf("%w: a malformed first message", ErrAuthentication)
	}
	s.gs2, s.clientFirstBare = flag+","+authz+",", bare
	attrs := strings.Split(bare, ",")
	if len(attrs) < 2 || !strings.HasPrefix(attrs[0], "n=") || !strings.HasPrefix(attrs[1], "r=") || len(attrs[1]) < 3 {
		return nil, fmt.Errorf("%w: a malformed first message", ErrAuthentication)
	}
	for _, ext := range attrs[2:] {
		if ext == "tokenauth=true" {
			return nil, fmt.Errorf("%w: delegation tokens are not served", ErrAuthentication)
		}
	}
	user := strings.NewReplacer("=2C", ",", "=3D", "=").Replace(attrs[0][2:])
	if az := strings.TrimPrefix(authz, "a="); az != "" && az != user {
		return nil, fmt.Errorf("%w: authorization id %q is not the user", ErrAuthentication, az)
	}
	s.user = user
	cred, ok := s.lookup(user)
	if !ok {
		return nil, fmt.Errorf("%w: invalid user credentials", ErrAuthentication)
	}
	s.cred = cred
	server := make([]byte, 24)
	rand.Read(server)
	s.nonce = attrs[1][2:] + base64.RawStdEncoding.EncodeToString(server)
	s.serverFirst = "r=" + s.nonce + ",s=" + base64.StdEncoding.EncodeToString(cred.Salt) + ",i=" + strconv.Itoa(int(cred.Iterations))
	return []byte(s.serverFirst), nil
}

func (s *Server) final(msg string) ([]byte, error) {
	i := strings.LastIndex(msg, ",p=")
	if i < 0 {
		return nil, fmt.Errorf("%w: no proof", ErrAuthentication)
	}
	withoutProof, proof64 := msg[:i], msg[i+3:]
	attrs := strings.Split(withoutProof, ",")
	// The nonce must end with the server's (librdkafka puts its own
	// nonce before it once more; Kafka accepts that, and so does Strand).
	if len(attrs) < 2 || attrs[0] != "c="+base64.StdEncoding.EncodeToString([]byte(s.gs2)) ||
		!strings.HasPrefix(attrs[1], "r=") || !strings.HasSuffix(attrs[1], s.nonce) {
		return nil, fmt.Errorf("%w: the final message does not follow the first", ErrAuthentication)
	}
	proof, err := base64.StdEncoding.DecodeString(proof64)
	if err != nil || len(proof) != len(s.cred.StoredKey) {
		return nil, fmt.Errorf("%w: a malformed proof", ErrAuthentication)
	}
	auth := s.clientFirstBare + "," + s.serverFirst + "," + withoutProof
	h := s.mech.hash()
	signature := mac(h, s.cred.StoredKey, auth)
	clientKey := make([]byte, len(proof))
	for j := range proof {
		clientKey[j] = proof[j] ^ signature[j]
	}
	stored := h()
	stored.Write(clientKey)
	if subtle.ConstantTimeCompare(stored.Sum(nil), s.cred.StoredKey) != 1 {
		return nil, fmt.Errorf("%w: invalid user credentials", ErrAuthentication)
	}
	return []byte("v=" + base64.StdEncoding.EncodeToString(mac(h, s.cred.ServerKey, auth))), nil
}

// Verify says whether password is the one c was made from (for SASL
// PLAIN, which sends the password itself).
func (m Mechanism) Verify(password string, c Credential) bool {
	salted, err := m.SaltedPassword(password, c.Salt, c.Iterations)
	if err != nil {
		return false
	}
	return hmac.Equal(m.FromSaltedPassword(salted, c.Salt, c.Iterations).StoredKey, c.StoredKey)
}
