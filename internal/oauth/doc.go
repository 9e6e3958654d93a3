// Package oauth is the broker's side of SASL OAUTHBEARER (RFC 7628,
// KIP-255/KIP-768): it reads the client's message and validates its
// bearer token, a JWT signed with a key of a configured JWKS (RS256,
// RS384, RS512, PS256, PS384, PS512, ES256, ES384, ES512), checking its
// expiry (with clock skew), not-before, issuer and audience as Kafka's
// OAuthBearerValidatorCallbackHandler does. Kafka's unsecured tokens (alg
// none) are refused unless allowed. The principal is the token's subject
// claim.
package oauth
