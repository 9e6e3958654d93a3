package server

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/config"
	"github.com/strandlog/strand/internal/oauth"
	"github.com/strandlog/strand/internal/protocol"
	"github.com/strandlog/strand/internal/scram"
)

// saslMaxReceive bounds a frame before its connection authenticated, as
// Kafka's sasl.server.max.receive.size does.
const saslMaxReceive = 512 << 10

// saslConn is a SASL listener's connection before and after its client
// authenticated: until then it is served ApiVersions, SaslHandshake and
// SaslAuthenticate only, answered here.
type saslConn struct {
	mechanisms []string // offered
	mechanism  string   // chosen by the handshake
	scram      *scram.Server
	reauth     bool      // a re-authentication of a connection that was done
	raw        bool      // tokens come as raw frames (a v0 handshake)
	done       bool      // authenticated
	user       string    // who is authenticating, or authenticated
	principal  string    // who authenticated last (kept by a re-authentication)
	expires    time.Time // when the authentication ends (zero: never)
	// tokenExpires is when an OAUTHBEARER token ends: the session ends
	// then too, with re-authentication on.
	tokenExpires time.Time
}

// answerSASL serves a SASL request of a connection not yet authenticated;
// close says the connection closes once the answer is sent (a failed or
// out-of-order authentication).
func (c *conn) answerSASL(req *protocol.Request) (resp *protocol.Response, close bool) {
	s := c.sasl
	switch body := req.Body.(type) {
	case *kmsg.SASLHandshakeRequest:
		out := body.ResponseKind().(*kmsg.SASLHandshakeResponse)
		out.SupportedMechanisms = s.mechanisms
		if !slices.Contains(s.mechanisms, body.Mechanism) {
			out.ErrorCode = kerr.UnsupportedSaslMechanism.Code
			return &protocol.Response{Body: out}, false
		}
		s.mechanism, s.scram = body.Mechanism, nil
		// After a v0 handshake the tokens come as raw frames, without
		// SaslAuthenticate around them.
		s.raw = body.Version == 0
		return &protocol.Response{Body: out}, false
	case *kmsg.SASLAuthenticateRequest:
		out := body.ResponseKind().(*kmsg.SASLAuthenticateResponse)
		answer, code, msg := c.stepSASL(req.ClientID, req.Software, body.SASLAuthBytes)
		if code == 0 && s.done && s.reauth && s.user != s.principal {
			// A re-authentication keeps the principal (KIP-368).
			code, msg = kerr.SaslAuthenticationFailed.Code, "Cannot change principals during re-authentication"
			c.warn(req.ClientID, req.Software, "closing connection: SASL re-authentication as another user", "principal",
				"User:"+s.principal, "user", s.user)
		}
		if code != 0 {
			out.ErrorCode, out.ErrorMessage = code, &msg
			return &protocol.Response{Body: out}, true
		}
		out.SASLAuthBytes = answer
		if s.done {
			s.reauth, s.principal = false, s.user
			if lifetime := c.srv.cfg.ConnectionsMaxReauth; lifetime > 0 {
				now := time.Now()
				s.expires = now.Add(lifetime)
				if !s.tokenExpires.IsZero() && s.tokenExpires.Before(s.expires) {
					s.expires = s.tokenExpires // KIP-368: no longer than the token
				}
				out.SessionLifetimeMillis = max(s.expires.Sub(now).Milliseconds(), 1)
			}
		}
		return &protocol.Response{Body: out}, false
	}
	return nil, true
}

// stepSASL takes the client's next token of the chosen mechanism and gives
// the server's, or the error code and message that end the connection.
func (c *conn) stepSASL(clientID string, sw protocol.Software, token []byte) (answer []byte, code int16, msg string) {
	s := c.sasl
	var cause error
	fail := func(code int16, msg string) ([]byte, int16, string) {
		args := []any{"mechanism", s.mechanism, "user", s.user, "reason", msg}
		if cause != nil {
			args = append(args, "err", cause)
		}
		c.warn(clientID, sw, "closing connection: SASL authentication failed", args...)
		return nil, code, msg
	}
	switch s.mechanism {
	case "":
		return fail(kerr.IllegalSaslState.Code, "SaslAuthenticate before SaslHandshake")
	case "PLAIN":
		user, ok := c.checkPlain(token)
		s.user = user
		if !ok {
			return fail(kerr.SaslAuthenticationFailed.Code, "Authentication failed: Invalid username or password")
		}
		s.done = true
	case "OAUTHBEARER":
		tok, err := c.checkBearer(token)
		s.user = tok.Principal
		if err != nil {
			cause = err
			return fail(kerr.SaslAuthenticationFailed.Code, "Authentication failed: Invalid token")
		}
		s.done, s.tokenExpires = true, tok.Expires
	default:
		mech, _ := scram.ParseMechanism(s.mechanism)
		if s.scram == nil {
			s.scram = mech.NewServer(func(user string) (scram.Credential, bool) { return c.credential(user, mech) })
		}
		a, done, err := s.scram.Step(token)
		s.user = s.scram.User()
		if err != nil {
			cause = err
			return fail(kerr.SaslAuthenticationFailed.Code,
				"Authentication failed during authentication due to invalid credentials with SASL mechanism "+s.mechanism)
		}
		answer, s.done = a, done
	}
	if s.done {
		c.logger.Debug("authenticated", "mechanism", s.mechanism, "principal", "User:"+s.user)
	}
	return answer, 0, ""
}

// credential is user's SCRAM credential for mech, from the cluster
// metadata.
func (c *conn) credential(user string, mech scram.Mechanism) (scram.Credential, bool) {
	if user == selfUser {
		if c.srv.self == nil {
			return scram.Credential{}, false
		}
		cred, ok := c.srv.self.creds[mech]
		return cred, ok
	}
	cred, ok := c.srv.cluster.ScramCredentials()[user][int8(mech)]
	return scram.Credential(cred), ok
}

// checkPlain reads a SASL PLAIN message ([authzid] NUL user NUL password)
// and checks the password against the user's SCRAM credential.
func (c *conn) checkPlain(msg []byte) (string, bool) {
	user, password, ok := parsePlain(msg)
	if !ok {
		return user, false
	}
	for _, mech := range []scram.Mechanism{scram.SHA512, scram.SHA256} {
		if cred, ok := c.credential(user, mech); ok {
			return user, mech.Verify(password, cred)
		}
	}
	return user, false
}

// parsePlain reads a SASL PLAIN message (RFC 4616): [authzid] NUL authcid
// NUL passwd, the authorization id empty or the user's own.
func parsePlain(msg []byte) (user, password string, ok bool) {
	parts := bytes.Split(msg, []byte{0})
	if len(parts) != 3 {
		return "", "", false
	}
	authz, user, password := string(parts[0]), string(parts[1]), string(parts[2])
	if user == "" || password == "" || (authz != "" && authz != user) {
		return user, "", false
	}
	return user, password, true
}

// checkBearer validates an OAUTHBEARER client message's token.
func (c *conn) checkBearer(msg []byte) (oauth.Token, error) {
	if c.srv.oauth == nil {
		return oauth.Token{}, errors.New("OAUTHBEARER is not configured")
	}
	token, _, err := oauth.ParseMessage(msg)
	if err != nil {
		return oauth.Token{}, err
	}
	return c.srv.oauth.Validate(token, time.Now())
}

// oauthConfig is how OAUTHBEARER tokens are validated, when the mechanism
// is offered.
func oauthConfig(cfg config.Broker) (*oauth.Config, error) {
	if !slices.Contains(cfg.SASLMechanisms, "OAUTHBEARER") {
		return nil, nil
	}
	oc := &oauth.Config{Audience: cfg.OAuthAudience, Issuer: cfg.OAuthIssuer, SubClaim: cfg.OAuthSubClaim,
		ClockSkew: cfg.OAuthClockSkew, AllowUnsecured: cfg.OAuthUnsecured}
	if cfg.OAuthJWKS != "" {
		f, err := oauth.OpenJWKS(cfg.OAuthJWKS)
		if err != nil {
			return nil, fmt.Errorf("sasl.oauthbearer.jwks.endpoint.url: %w", err)
		}
		oc.KeyFile = f
	}
	return oc, nil
}

// beginReauth starts a re-authentication (KIP-368): the client sent
// SaslHandshake again on a connection that had authenticated.
func (s *saslConn) beginReauth() {
	s.done, s.reauth, s.mechanism, s.scram, s.tokenExpires = false, true, "", nil, time.Time{}
}

// expired says whether the authentication has ended.
func (s *saslConn) expired(now time.Time) bool {
	return !s.expires.IsZero() && now.After(s.expires)
}
