package admin

import (
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestAnsweredErrors: every error code in an answer counts once under its
// API and Kafka's name for it, the hot path's answers as the others;
// answers without errors count nothing.
func TestAnsweredErrors(t *testing.T) {
	m := NewMetrics()
	produce := kmsg.NewPtrProduceResponse()
	for _, code := range []int16{0, kerr.NotLeaderForPartition.Code, kerr.NotLeaderForPartition.Code, kerr.InvalidRecord.Code} {
		p := kmsg.NewProduceResponseTopicPartition()
		p.ErrorCode = code
		t := kmsg.NewProduceResponseTopic()
		t.Partitions = append(t.Partitions, p)
		produce.Topics = append(produce.Topics, t)
	}
	m.Answered(0, time.Millisecond, produce)
	metadata := kmsg.NewPtrMetadataResponse()
	mt := kmsg.NewMetadataResponseTopic()
	mt.ErrorCode = kerr.UnknownTopicOrPartition.Code
	mp := kmsg.NewMetadataResponseTopicPartition()
	mp.ErrorCode = kerr.LeaderNotAvailable.Code
	mt.Partitions = append(mt.Partitions, mp)
	metadata.Topics = append(metadata.Topics, mt)
	m.Answered(3, time.Millisecond, metadata)
	configs := kmsg.NewPtrDescribeConfigsResponse()
	cr := kmsg.NewDescribeConfigsResponseResource()
	cr.ErrorCode = kerr.InvalidRequest.Code
	configs.Resources = append(configs.Resources, cr)
	m.Answered(32, time.Millisecond, configs)
	m.Answered(18, time.Millisecond, kmsg.NewPtrApiVersionsResponse())
	m.Answered(0, time.Millisecond, nil) // acks=0

	for _, tc := range []struct {
		api, err string
		want     float64
	}{
		{"Produce", "NOT_LEADER_FOR_PARTITION", 2},
		{"Produce", "INVALID_RECORD", 1},
		{"Metadata", "UNKNOWN_TOPIC_OR_PARTITION", 1},
		{"Metadata", "LEADER_NOT_AVAILABLE", 1},
		{"DescribeConfigs", "INVALID_REQUEST", 1},
	} {
		var got dto.Metric
		if err := m.errors.WithLabelValues(tc.api, tc.err).Write(&got); err != nil || got.GetCounter().GetValue() != tc.want {
			t.Errorf("%s %s: %v, want %v", tc.api, tc.err, got.GetCounter().GetValue(), tc.want)
		}
	}
	fams, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == "strand_request_errors_total" && len(f.Metric) != 5 {
			t.Errorf("%d error series, want 5", len(f.Metric))
		}
	}
}
