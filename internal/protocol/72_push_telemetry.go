package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// PushTelemetry: v0 (KIP-714)
//
// Behaviour:
//   - Kafka's checks, in its order: a zero instance id, or a push after
//     the client said it was terminating, is INVALID_REQUEST; a push within
//     the interval (but the first after GetTelemetrySubscriptions, and a
//     terminating one) THROTTLING_QUOTA_EXCEEDED; a subscription id that
//     is not the client's current one UNKNOWN_SUBSCRIPTION_ID; an unknown
//     codec UNSUPPORTED_COMPRESSION_TYPE; more than telemetry.max.bytes,
//     before or after decompressing, TELEMETRY_TOO_LARGE.
//   - The metrics (OTLP) are decoded and kept as the instance's latest
//     values, exported on /metrics; a payload that does not decode is
//     INVALID_RECORD, which tells the client to stop pushing.
//
// Authorization: none, as in Kafka.

func init() { register(72, 0, 0, handlePushTelemetry) }

func handlePushTelemetry(_ context.Context, b *Broker, r *Request) (*Response, error) {
	req := r.Body.(*kmsg.PushTelemetryRequest)
	resp := req.ResponseKind().(*kmsg.PushTelemetryResponse)
	if b.Telemetry == nil {
		resp.ErrorCode = kerr.UnsupportedVersion.Code
		return reply(resp)
	}
	err := b.Telemetry.Push(telemetryClient(r, req.ClientInstanceID), req.SubscriptionID, req.Terminating,
		req.CompressionType, req.Metrics, b.telemetrySubscriptions())
	if resp.ErrorCode = telemetryErrorCode(err); err != nil {
		b.Logger.Debug("push telemetry refused", "client", r.Client, "client_id", r.ClientID, "err", err)
	}
	return reply(resp)
}
