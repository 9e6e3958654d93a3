package scram

import (
	"strings"
	"testing"
)

// FuzzServer: whatever a client sends, an exchange answers or fails, never
// panics, and never succeeds without the right proof.
func FuzzServer(f *testing.F) {
	cred, _ := SHA256.NewCredential("pencil", MinIterations)
	f.Add("n,,n=user,r=abc", "c=biws,r=abc,p=AAAA")
	f.Add("y,,n=user,r=abc,tokenauth=true", "")
	f.Add("n,a=user,n=user,r=x", "c=biws,r=x,p=")
	f.Add("p=tls-unique,,n=user,r=x", "c=,p=")
	f.Add(",,,,", ",p=,p=")
	f.Fuzz(func(t *testing.T, first, final string) {
		srv := SHA256.NewServer(func(u string) (Credential, bool) { return cred, u == "user" })
		answer, done, err := srv.Step([]byte(first))
		if err != nil || done {
			return
		}
		if !strings.HasPrefix(string(answer), "r=") {
			t.Fatalf("server-first %q", answer)
		}
		if _, done, err := srv.Step([]byte(final)); err == nil || !done {
			// A fuzzed final message cannot carry the proof of "pencil"
			// for a nonce it did not see.
			t.Fatalf("final %q accepted (done %v)", final, done)
		}
		if _, _, err := srv.Step(nil); err == nil {
			t.Fatal("a step after the end succeeded")
		}
	})
}
