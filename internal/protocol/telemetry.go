package protocol

import (
	"errors"
	"net"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strandlog/strand/internal/telemetry"
)

// telemetryClient is what KIP-714's subscriptions match on: the request's
// client id, the software its connection named, and where it comes from.
func telemetryClient(r *Request, instanceID [16]byte) telemetry.Client {
	c := telemetry.Client{InstanceID: instanceID, ClientID: r.ClientID, SoftwareName: r.Software.Name,
		SoftwareVersion: r.Software.Version, SourceAddress: r.Host}
	if host, port, err := net.SplitHostPort(r.Client); err == nil {
		c.SourceAddress, c.SourcePort = host, port
	}
	return c
}

// telemetrySubscriptions are the client metrics subscriptions in the
// cluster metadata. Their configs were checked when set; one that does not
// parse is left out.
func (b *Broker) telemetrySubscriptions() []telemetry.Subscription {
	var subs []telemetry.Subscription
	for _, name := range b.Cluster.ClientMetricsNames() {
		s, err := telemetry.ParseSubscription(name, b.Cluster.ClientMetrics(name))
		if err != nil {
			b.Logger.Warn("client metrics subscription left out", "err", err)
			continue
		}
		subs = append(subs, s)
	}
	return subs
}

// telemetryErrorCode is Kafka's code for a telemetry refusal.
func telemetryErrorCode(err error) int16 {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, telemetry.ErrThrottled):
		return kerr.ThrottlingQuotaExceeded.Code
	case errors.Is(err, telemetry.ErrUnknownSubscription):
		return kerr.UnknownSubscriptionID.Code
	case errors.Is(err, telemetry.ErrUnsupportedCompression):
		return kerr.UnsupportedCompressionType.Code
	case errors.Is(err, telemetry.ErrTooLarge):
		return kerr.TelemetryTooLarge.Code
	case errors.Is(err, telemetry.ErrMalformed):
		return kerr.InvalidRecord.Code
	case errors.Is(err, telemetry.ErrInvalidRequest):
		return kerr.InvalidRequest.Code
	}
	return kerr.UnknownServerError.Code
}
