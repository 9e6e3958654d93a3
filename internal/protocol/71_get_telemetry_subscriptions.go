package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/model"
)

// GetTelemetrySubscriptions: v0 (KIP-714)
//
// Behaviour:
//   - A client without an instance id (zero) is given one; the answer is
//     the metrics the client metrics subscriptions that match it ask for
//     (their union, "*" for all, none when none matches), the shortest of
//     their intervals (five minutes when none does), a subscription id the
//     client's pushes must name, and telemetry.max.bytes.
//   - Every codec is accepted, zstd first as Kafka prefers; the client is
//     asked for cumulative totals (DeltaTemporality false), which is what
//     /metrics exports.
//   - A client asking again before its push interval is
//     THROTTLING_QUOTA_EXCEEDED, unless its last push was refused for its
//     subscription id or codec.
//
// Authorization: none, as in Kafka.

func init() { register(71, 0, 0, handleGetTelemetrySubscriptions) }

// acceptedTelemetryCodecs are the codecs a client may push with, in
// Kafka's order of preference.
var acceptedTelemetryCodecs = []int8{int8(model.CompressionZstd), int8(model.CompressionLZ4),
	int8(model.CompressionGzip), int8(model.CompressionSnappy)}

func handleGetTelemetrySubscriptions(_ context.Context, b *Broker, r *Request) (*Response, error) {
	req := r.Body.(*kmsg.GetTelemetrySubscriptionsRequest)
	resp := req.ResponseKind().(*kmsg.GetTelemetrySubscriptionsResponse)
	if b.Telemetry == nil {
		resp.ErrorCode = kerr.UnsupportedVersion.Code
		return reply(resp)
	}
	a, err := b.Telemetry.Subscribe(telemetryClient(r, req.ClientInstanceID), b.telemetrySubscriptions())
	if resp.ErrorCode = telemetryErrorCode(err); err != nil {
		return reply(resp)
	}
	resp.ClientInstanceID, resp.SubscriptionID, resp.RequestedMetrics = a.InstanceID, a.SubscriptionID, a.Metrics
	resp.AcceptedCompressionTypes = acceptedTelemetryCodecs
	resp.PushIntervalMillis, resp.TelemetryMaxBytes = int32(a.Interval.Milliseconds()), int32(a.MaxBytes)
	resp.DeltaTemporality = false
	return reply(resp)
}
