// Package quota enforces client quotas as Kafka does: producer and
// consumer byte rates, the request-time percentage and the controller
// mutation rate, set per user, per client id, per both and as defaults of
// each, resolved in Kafka's order, and the connection creation rate per
// IP;
// each client's use is measured over a sliding window of samples, and a
// client over its quota is given the throttle time that brings its rate
// back to the quota (KIP-219: the broker answers at once with it and
// reads nothing more from the connection meanwhile). The quotas
// themselves live in the cluster metadata.
package quota
