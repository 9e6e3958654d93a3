package server

import (
	"bytes"
	"testing"
)

// FuzzParsePlain: any SASL PLAIN message is read or refused, never a
// panic, and what is read is what was sent.
func FuzzParsePlain(f *testing.F) {
	f.Add([]byte("\x00alice\x00secret"))
	f.Add([]byte("alice\x00alice\x00secret"))
	f.Add([]byte("bob\x00alice\x00secret"))
	f.Add([]byte("\x00\x00"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, msg []byte) {
		user, password, ok := parsePlain(msg)
		if !ok {
			return
		}
		if user == "" || password == "" || !bytes.Contains(msg, []byte("\x00"+user+"\x00"+password)) ||
			bytes.Count(msg, []byte{0}) != 2 {
			t.Fatalf("%q read as user %q, password %q", msg, user, password)
		}
	})
}
