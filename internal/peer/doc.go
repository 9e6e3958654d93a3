// Package peer is the inter-broker client: one connection per peer broker,
// speaking the Kafka protocol through kmsg (never a second client library),
// for the requests one broker makes of another: forwarding a request to the
// broker that can answer it, transaction markers, produce verification and
// (with replication) replica fetches. Every request carries this broker's
// identity as its client id ("strand-broker-<node id>").
//
// A connection serves one request at a time; a failed one is closed and
// dialled again on the next request, after a backoff that doubles up to a
// second, so a dead peer costs a caller its timeout and not a retry storm.
//
// Locking: Client.mu guards the connection table; each conn's mu is held for
// one whole request and response, never together with Client.mu.
package peer
