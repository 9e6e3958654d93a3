package testutil

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// EnableShareGroups finalizes share.version 1 through r (a client), as
// kafka-features.sh upgrade --feature share.version=1 does.
func EnableShareGroups(t testing.TB, r kmsg.Requestor) {
	t.Helper()
	SetShareVersion(t, r, 1)
}

// SetShareVersion finalizes share.version at level through r, upgrading
// or (safely) downgrading, and fails the test unless the feature took it.
func SetShareVersion(t testing.TB, r kmsg.Requestor, level int16) {
	t.Helper()
	req := kmsg.NewPtrUpdateFeaturesRequest()
	u := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
	u.Feature, u.MaxVersionLevel, u.UpgradeType = "share.version", level, 1
	if level == 0 {
		u.UpgradeType = 2 // a safe downgrade
	}
	req.FeatureUpdates = append(req.FeatureUpdates, u)
	resp, err := req.RequestWith(context.Background(), r)
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	for i := 0; err == nil && i < len(resp.Results); i++ {
		err = kerr.ErrorForCode(resp.Results[i].ErrorCode)
	}
	if err != nil {
		t.Fatalf("finalizing share.version %d: %v", level, err)
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

// AwaitGroupConfig waits until every broker of addrs describes group's
// config name as value: a config set through one broker reaches the
// others with the metadata, and a partition's leader reads it from its
// own (share.auto.offset.reset, when a share-partition first starts).
func AwaitGroupConfig(t testing.TB, addrs []string, group, name, value string) {
	t.Helper()
	for _, addr := range addrs {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		Eventually(t, 30*time.Second, func() error {
			req := kmsg.NewPtrDescribeConfigsRequest()
			res := kmsg.NewDescribeConfigsRequestResource()
			res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
			res.ConfigNames = []string{name}
			req.Resources = append(req.Resources, res)
			// The seed itself, not whichever broker the client picks.
			resp, err := req.RequestWith(context.Background(), cl.SeedBrokers()[0])
			if err != nil {
				return err
			}
			for _, r := range resp.Resources {
				for _, c := range r.Configs {
					if c.Name == name && c.Value != nil && *c.Value == value {
						return nil
					}
				}
			}
			return fmt.Errorf("broker %s does not describe %s=%s for group %s yet", addr, name, value, group)
		})
	}
}
