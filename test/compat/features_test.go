package compat

import (
	"context"
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// featureTool is kafka-features.sh's main class.
const featureTool = "org.apache.kafka.tools.FeatureCommand"

// updateFeatures sends one UpdateFeatures request (v1, validate only or
// not) and returns its top-level error code.
func updateFeatures(t *testing.T, cl *kgo.Client, validateOnly bool, updates ...kmsg.UpdateFeaturesRequestFeatureUpdate) (int16, string) {
	t.Helper()
	req := kmsg.NewPtrUpdateFeaturesRequest()
	req.SetVersion(1)
	req.ValidateOnly, req.FeatureUpdates = validateOnly, updates
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("UpdateFeatures: %v", err)
	}
	return resp.ErrorCode, strPtr(resp.ErrorMessage)
}

func featureUpdate(name string, level int16, upgradeType int8) kmsg.UpdateFeaturesRequestFeatureUpdate {
	u := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
	u.Feature, u.MaxVersionLevel, u.UpgradeType = name, level, upgradeType
	return u
}

// testFeatures: UpdateFeatures answers as a real Kafka (kafkaAddr) does
// for the features Strand serves, validated only; then on Strand,
// kafka-features.sh downgrades group.version to 0, after which a consumer
// group member's heartbeat is UNSUPPORTED_VERSION as on Kafka, describes
// the level, and upgrades it back.
func testFeatures(t *testing.T, kafkaAddr string) {
	kcl := client(t, kafkaAddr)
	b := startBroker(t)
	scl := client(t, b.Addr)
	const upgrade, safe, unsafe = 1, 2, 3
	for _, tc := range []struct {
		name    string
		updates []kmsg.UpdateFeaturesRequestFeatureUpdate
	}{
		{"the level in force", []kmsg.UpdateFeaturesRequestFeatureUpdate{featureUpdate("group.version", 1, upgrade)}},
		{"a safe downgrade", []kmsg.UpdateFeaturesRequestFeatureUpdate{featureUpdate("group.version", 0, safe)}},
		{"an unsafe downgrade", []kmsg.UpdateFeaturesRequestFeatureUpdate{featureUpdate("transaction.version", 1, unsafe)}},
		{"a downgrade as an upgrade", []kmsg.UpdateFeaturesRequestFeatureUpdate{featureUpdate("group.version", 0, upgrade)}},
		{"beyond the range", []kmsg.UpdateFeaturesRequestFeatureUpdate{featureUpdate("group.version", 9, upgrade)}},
		{"below 0", []kmsg.UpdateFeaturesRequestFeatureUpdate{featureUpdate("transaction.version", -1, safe)}},
		{"no such feature", []kmsg.UpdateFeaturesRequestFeatureUpdate{featureUpdate("no.such.version", 1, upgrade)}},
		{"an unknown upgrade type", []kmsg.UpdateFeaturesRequestFeatureUpdate{featureUpdate("group.version", 1, 7)}},
		{"one bad among good", []kmsg.UpdateFeaturesRequestFeatureUpdate{featureUpdate("transaction.version", 2, upgrade),
			featureUpdate("group.version", 9, upgrade)}},
	} {
		want, wantMsg := updateFeatures(t, kcl, true, tc.updates...)
		got, msg := updateFeatures(t, scl, true, tc.updates...)
		if got != want {
			t.Errorf("%s: %v (%s), Kafka answers %v (%s)", tc.name, kerr.ErrorForCode(got), msg, kerr.ErrorForCode(want), wantMsg)
		}
	}

	// group.version 0 on Strand, with Kafka's tool: the consumer group
	// protocol is refused as Kafka refuses it there.
	describe := func() string {
		r := runKafkaTool(t, featureTool, "--bootstrap-server", b.Addr, "describe")
		if r.err != nil {
			t.Fatalf("kafka-features.sh describe: %v", r)
		}
		return r.stdout
	}
	if r := runKafkaTool(t, featureTool, "--bootstrap-server", b.Addr, "downgrade", "--feature", "group.version=0"); r.err != nil {
		t.Fatalf("kafka-features.sh downgrade: %v", r)
	}
	level := func(n int) *regexp.Regexp {
		return regexp.MustCompile(fmt.Sprintf(`Feature: group.version\s+SupportedMinVersion: 0\s+SupportedMaxVersion: 1\s+FinalizedVersionLevel: %d\s`, n))
	}
	if out := describe(); !level(0).MatchString(out) {
		t.Errorf("after the downgrade, describe says:\n%s", out)
	}
	heartbeat := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	heartbeat.Group, heartbeat.MemberID, heartbeat.MemberEpoch, heartbeat.RebalanceTimeoutMillis = "g", "a-member-of-g", 0, 30000
	heartbeat.SubscribedTopicNames, heartbeat.Topics = []string{"t"}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := heartbeat.RequestWith(ctx, scl)
	if err != nil || resp.ErrorCode != kerr.UnsupportedVersion.Code {
		t.Errorf("a heartbeat at group.version 0: %v, %+v", err, resp)
	}
	if r := runKafkaTool(t, featureTool, "--bootstrap-server", b.Addr, "upgrade", "--feature", "group.version=1"); r.err != nil {
		t.Fatalf("kafka-features.sh upgrade: %v", r)
	}
	if out := describe(); !level(1).MatchString(out) {
		t.Errorf("after the upgrade, describe says:\n%s", out)
	}
	if resp, err := heartbeat.RequestWith(ctx, scl); err != nil || resp.ErrorCode != 0 {
		t.Errorf("a heartbeat at group.version 1: %v, %+v", err, resp)
	}
}
