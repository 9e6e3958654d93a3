// Package scram holds what SCRAM (RFC 5802, RFC 7677) needs on the broker's
// side: the mechanisms Kafka names (SCRAM-SHA-256, SCRAM-SHA-512) and the
// credential a user's password becomes, a salt, an iteration count and the
// stored and server keys, never the password itself. Kafka's
// AlterUserScramCredentials sends the salted password; the keys are
// derived from it here.
package scram
