package scram

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"fmt"
	"hash"
)

// Mechanism is a SCRAM mechanism by its number in Kafka's
// DescribeUserScramCredentials and AlterUserScramCredentials.
type Mechanism int8

const (
	SHA256 Mechanism = 1 // SCRAM-SHA-256
	SHA512 Mechanism = 2 // SCRAM-SHA-512
)

// Iteration counts Kafka accepts.
const (
	MinIterations = 4096
	MaxIterations = 16384
)

// ParseMechanism reads a mechanism's name.
func ParseMechanism(name string) (Mechanism, error) {
	switch name {
	case "SCRAM-SHA-256":
		return SHA256, nil
	case "SCRAM-SHA-512":
		return SHA512, nil
	}
	return 0, fmt.Errorf("unknown SCRAM mechanism %q: SCRAM-SHA-256 or SCRAM-SHA-512", name)
}

// Known says whether m is a mechanism served.
func (m Mechanism) Known() bool { return m == SHA256 || m == SHA512 }

func (m Mechanism) String() string {
	switch m {
	case SHA256:
		return "SCRAM-SHA-256"
	case SHA512:
		return "SCRAM-SHA-512"
	}
	return fmt.Sprintf("SCRAM(%d)", int8(m))
}

func (m Mechanism) hash() func() hash.Hash {
	if m == SHA512 {
		return sha512.New
	}
	return sha256.New
}

// Credential is what the broker keeps of a user's password for one
// mechanism.
type Credential struct {
	Salt       []byte `json:"salt"`
	StoredKey  []byte `json:"stored_key"`
	ServerKey  []byte `json:"server_key"`
	Iterations int32  `json:"iterations"`
}

// FromSaltedPassword is the credential of a salted password (Hi(password,
// salt, iterations) of RFC 5802), as AlterUserScramCredentials carries it.
func (m Mechanism) FromSaltedPassword(salted, salt []byte, iterations int32) Credential {
	h := m.hash()
	clientKey := mac(h, salted, "Client Key")
	stored := h()
	stored.Write(clientKey)
	return Credential{Salt: salt, StoredKey: stored.Sum(nil), ServerKey: mac(h, salted, "Server Key"), Iterations: iterations}
}

// SaltedPassword is Hi(password, salt, iterations).
func (m Mechanism) SaltedPassword(password string, salt []byte, iterations int32) ([]byte, error) {
	return pbkdf2.Key(m.hash(), password, salt, int(iterations), m.hash()().Size())
}

// NewCredential salts password with a fresh random salt.
func (m Mechanism) NewCredential(password string, iterations int32) (Credential, error) {
	salt := make([]byte, 32)
	rand.Read(salt)
	salted, err := m.SaltedPassword(password, salt, iterations)
	if err != nil {
		return Credential{}, err
	}
	return m.FromSaltedPassword(salted, salt, iterations), nil
}

func mac(h func() hash.Hash, key []byte, msg string) []byte {
	m := hmac.New(h, key)
	m.Write([]byte(msg))
	return m.Sum(nil)
}
