package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// SaslHandshake: v0-1, SaslAuthenticate: v0-2
//
// Behaviour: on a SASL listener the connection answers both itself until
// the client has authenticated (internal/server/sasl.go). They reach the
// handlers only where SASL has no place: on a PLAINTEXT or SSL listener,
// or after the connection authenticated. Both are ILLEGAL_SASL_STATE
// then, as in Kafka.

func init() {
	register(17, 0, 1, handleSaslHandshake)
	register(36, 0, 2, handleSaslAuthenticate)
}

func handleSaslHandshake(_ context.Context, _ *Broker, r *Request) (*Response, error) {
	resp := r.Body.(*kmsg.SASLHandshakeRequest).ResponseKind().(*kmsg.SASLHandshakeResponse)
	resp.ErrorCode = kerr.IllegalSaslState.Code
	return &Response{Body: resp}, nil
}

func handleSaslAuthenticate(_ context.Context, _ *Broker, r *Request) (*Response, error) {
	resp := r.Body.(*kmsg.SASLAuthenticateRequest).ResponseKind().(*kmsg.SASLAuthenticateResponse)
	resp.ErrorCode = kerr.IllegalSaslState.Code
	msg := "Unexpected SASL authentication request: the connection needs none, or already authenticated"
	resp.ErrorMessage = &msg
	return &Response{Body: resp}, nil
}
