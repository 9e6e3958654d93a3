package testutil

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// EnableShareGroups finalizes share.version 1 through r (a client), as
// kafka-features.sh upgrade --feature share.version=1 does.
func EnableShareGroups(t testing.TB, r kmsg.Requestor) {
	t.Helper()
	req := kmsg.NewPtrUpdateFeaturesRequest()
	u := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
	u.Feature, u.MaxVersionLevel, u.UpgradeType = "share.version", 1, 1
	req.FeatureUpdates = append(req.FeatureUpdates, u)
	resp, err := req.RequestWith(context.Background(), r)
	if err != nil || resp.ErrorCode != 0 {
		t.Fatalf("UpdateFeatures share.version=1: %v %+v", err, resp)
	}
}

// SetGroupConfig sets one of a group's configs, as kafka-configs.sh
// --entity-type groups --alter does.
func SetGroupConfig(t testing.TB, r kmsg.Requestor, group, name, value string) {
	t.Helper()
	if code := AlterGroupConfig(t, r, group, name, value); code != 0 {
		t.Fatalf("set %s=%s on group %s: error %d", name, value, group, code)
	}
}

// AlterGroupConfig asks to set one of a group's configs and returns the
// answer's error code.
func AlterGroupConfig(t testing.TB, r kmsg.Requestor, group, name, value string) int16 {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Value = name, &value
	res.Configs = append(res.Configs, c)
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(context.Background(), r)
	if err != nil || len(resp.Resources) != 1 {
		t.Fatalf("IncrementalAlterConfigs of group %s: %v %+v", group, err, resp)
	}
	return resp.Resources[0].ErrorCode
}
