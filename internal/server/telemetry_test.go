package server_test

import (
	"bytes"
	"compress/gzip"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/testutil"
)

// TestTelemetryErrorCodes: GetTelemetrySubscriptions and PushTelemetry
// (KIP-714) answer each refusal with Kafka's error code, in the order of
// Kafka's checks; a push refused for its codec or subscription lets the
// client ask for its subscription again at once, any other does not.
func TestTelemetryErrorCodes(t *testing.T) {
	b := testutil.StartBroker(t, nil)
	c := dialRaw(t, b.Addr)
	alter := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeClientMetrics, "raw-clients"
	for name, value := range map[string]string{"metrics": "org.apache.kafka.producer.", "interval.ms": "60000", "match": "client_id=raw-.*"} {
		cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		cfg.Name, cfg.Value = name, kmsg.StringPtr(value)
		res.Configs = append(res.Configs, cfg)
	}
	alter.Resources = append(alter.Resources, res)
	if r := c.do(alter).(*kmsg.IncrementalAlterConfigsResponse).Resources[0]; r.ErrorCode != 0 {
		t.Fatalf("setting the subscription: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	subscribe := func(id [16]byte) *kmsg.GetTelemetrySubscriptionsResponse {
		t.Helper()
		req := kmsg.NewPtrGetTelemetrySubscriptionsRequest()
		req.ClientInstanceID = id
		return c.do(req).(*kmsg.GetTelemetrySubscriptionsResponse)
	}
	push := func(id [16]byte, sub int32, codec int8, metrics []byte) int16 {
		t.Helper()
		req := kmsg.NewPtrPushTelemetryRequest()
		req.ClientInstanceID, req.SubscriptionID, req.CompressionType, req.Metrics = id, sub, codec, metrics
		return c.do(req).(*kmsg.PushTelemetryResponse).ErrorCode
	}
	first := subscribe([16]byte{})
	id := first.ClientInstanceID
	if first.ErrorCode != 0 || id == [16]byte{} || first.PushIntervalMillis != 60000 ||
		len(first.RequestedMetrics) != 1 || first.RequestedMetrics[0] != "org.apache.kafka.producer." ||
		first.TelemetryMaxBytes != 1<<20 || first.DeltaTemporality || len(first.AcceptedCompressionTypes) != 4 {
		t.Fatalf("first GetTelemetrySubscriptions: %+v", first)
	}
	noError := &kerr.Error{Message: "NONE"}
	expect := func(what string, got int16, want *kerr.Error) {
		t.Helper()
		if got != want.Code {
			t.Errorf("%s: %v, want %v", what, kerr.ErrorForCode(got), want)
		}
	}
	expect("asking again within the interval", subscribe(id).ErrorCode, kerr.ThrottlingQuotaExceeded)
	expect("pushing with codec 9", push(id, first.SubscriptionID, 9, []byte("x")), kerr.UnsupportedCompressionType)
	expect("asking after an unknown codec", subscribe(id).ErrorCode, noError)
	expect("pushing for another subscription", push(id, first.SubscriptionID+1, 0, nil), kerr.UnknownSubscriptionID)
	expect("asking after an unknown subscription", subscribe(id).ErrorCode, noError)
	expect("pushing what is not OTLP", push(id, first.SubscriptionID, 0, []byte("not protobuf at all")), kerr.InvalidRecord)
	expect("asking after a malformed push", subscribe(id).ErrorCode, kerr.ThrottlingQuotaExceeded)
	expect("pushing again within the interval", push(id, first.SubscriptionID, 0, nil), kerr.ThrottlingQuotaExceeded)
	expect("pushing without an instance id", push([16]byte{}, 0, 0, nil), kerr.InvalidRequest)

	other := subscribe([16]byte{})
	expect("a second instance", other.ErrorCode, noError)
	expect("pushing over telemetry.max.bytes", push(other.ClientInstanceID, other.SubscriptionID, 0, make([]byte, 1<<20+1)),
		kerr.TelemetryTooLarge)

	// A few kilobytes of gzip that decompress past telemetry.max.bytes.
	var bomb bytes.Buffer
	zw := gzip.NewWriter(&bomb)
	zw.Write(make([]byte, 64<<20))
	zw.Close()
	third := subscribe([16]byte{})
	expect("pushing what decompresses past telemetry.max.bytes", push(third.ClientInstanceID, third.SubscriptionID, 1, bomb.Bytes()),
		kerr.TelemetryTooLarge)
}
