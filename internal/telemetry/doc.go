// Package telemetry serves client metrics as KIP-714 describes: a client
// asks which metrics it should push (GetTelemetrySubscriptions), the
// broker answers from the client metrics subscriptions that match the
// client (its id, software, address), and the client pushes them every
// interval (PushTelemetry) as OTLP metrics. The broker keeps the latest
// values each client instance pushed, so that /metrics exports them by
// client id and software.
//
// Each broker keeps its own client instances, as Kafka's do: a client that
// moves to another broker is known there from its first request. An
// instance not heard from for three push intervals (and at least a
// minute) is forgotten with its values.
package telemetry
