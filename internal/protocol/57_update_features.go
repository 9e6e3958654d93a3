package protocol

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/acl"
)

// UpdateFeatures: v0-2 (KIP-584)
//
// Behaviour:
//   - Finalizes the levels of the features Strand serves
//     (transaction.version 0-2, group.version 0-1) in the cluster metadata,
//     every broker then advertising them (ApiVersions): kafka-features.sh
//     upgrade and downgrade, Admin.updateFeatures. Level 0 takes the
//     feature away. At group.version 0 the consumer group protocol
//     (KIP-848) is refused with UNSUPPORTED_VERSION, as Kafka refuses it;
//     at transaction.version 2 clients use KIP-890's transactions.
//   - As Kafka's controller, the request is all or nothing: the first
//     update that cannot be made is the answer's INVALID_UPDATE_VERSION
//     (a feature not served, a level outside its range or below 0, a
//     downgrade asked as an upgrade, an upgrade asked as a downgrade, an
//     unknown upgrade type), and nothing changes. A feature named twice is
//     INVALID_REQUEST. v0's AllowDowngrade is a safe downgrade.
//   - v0-1 answer each feature in Results (on success); v2 only the
//     top-level error. ValidateOnly (v1+) checks without changing.
//
// Authorization: ALTER on the cluster (CLUSTER_AUTHORIZATION_FAILED).

func init() { register(57, 0, 2, handleUpdateFeatures) }

// servedFeatures are the features Strand serves, with their level range.
var servedFeatures = map[string][2]int16{TransactionVersionFeature: {0, 2}, GroupVersionFeature: {0, 1}, ShareVersionFeature: {0, 1}}

// featureNames are the served features, in the order ApiVersions lists them.
var featureNames = []string{TransactionVersionFeature, GroupVersionFeature, ShareVersionFeature}

// Kafka's upgrade types (FeatureUpdate.UpgradeType).
const (
	upgradeTypeUpgrade         = 1
	upgradeTypeSafeDowngrade   = 2
	upgradeTypeUnsafeDowngrade = 3
)

func handleUpdateFeatures(_ context.Context, b *Broker, r *Request) (*Response, error) {
	req := r.Body.(*kmsg.UpdateFeaturesRequest)
	resp := req.ResponseKind().(*kmsg.UpdateFeaturesResponse)
	fail := func(err *kerr.Error, format string, args ...any) (*Response, error) {
		resp.ErrorCode, resp.ErrorMessage = err.Code, kmsg.StringPtr(fmt.Sprintf(format, args...))
		return reply(resp)
	}
	if !b.allowedCluster(r, acl.Alter) {
		return fail(kerr.ClusterAuthorizationFailed, "Cluster authorization failed.")
	}
	levels := map[string]int16{}
	for _, u := range req.FeatureUpdates {
		if _, twice := levels[u.Feature]; twice {
			return fail(kerr.InvalidRequest, "Feature %s appears more than once in the request.", u.Feature)
		}
		upgrade := u.UpgradeType
		if req.Version == 0 {
			upgrade = upgradeTypeUpgrade
			if u.AllowDowngrade {
				upgrade = upgradeTypeSafeDowngrade
			}
		}
		invalid := func(why string) (*Response, error) {
			return fail(kerr.InvalidUpdateVersion, "Invalid update version %d for feature %s. %s", u.MaxVersionLevel, u.Feature, why)
		}
		span, served := servedFeatures[u.Feature]
		current := b.featureLevel(u.Feature)
		switch {
		case upgrade < upgradeTypeUpgrade || upgrade > upgradeTypeUnsafeDowngrade:
			return invalid("The upgrade type is not one this broker knows.")
		case u.MaxVersionLevel < 0:
			return invalid("A feature level cannot be below 0.")
		case !served:
			return invalid("This cluster does not serve that feature.")
		case u.MaxVersionLevel < span[0] || u.MaxVersionLevel > span[1]:
			return invalid(fmt.Sprintf("This cluster serves its levels %d to %d.", span[0], span[1]))
		case u.MaxVersionLevel < current && upgrade == upgradeTypeUpgrade:
			return invalid("A downgrade needs the upgrade type safe or unsafe downgrade.")
		case u.MaxVersionLevel > current && upgrade != upgradeTypeUpgrade:
			return invalid("A downgrade cannot raise the level.")
		}
		levels[u.Feature] = u.MaxVersionLevel
	}
	if !req.ValidateOnly && len(levels) > 0 {
		if err := b.Cluster.SetFeatures(levels, false); err != nil {
			resp.ErrorCode, resp.ErrorMessage = errorCode(err), errorMessage(err)
			return reply(resp)
		}
	}
	if req.Version <= 1 {
		for _, u := range req.FeatureUpdates {
			res := kmsg.NewUpdateFeaturesResponseResult()
			res.Feature = u.Feature
			resp.Results = append(resp.Results, res)
		}
	}
	return reply(resp)
}

// featureLevel is a served feature's finalized level: the cluster
// metadata's, else this broker's default (transaction.version from its
// settings, group.version 1, share.version 1, as Kafka 4.2 and later
// format a new cluster).
func (b *Broker) featureLevel(name string) int16 {
	if level, _, ok := b.Cluster.FeatureLevel(name); ok {
		return level
	}
	switch name {
	case TransactionVersionFeature:
		return b.Config.TransactionVersion
	case GroupVersionFeature, ShareVersionFeature:
		return 1
	}
	return 0
}

// consumerGroupsServed reports whether the consumer group protocol
// (KIP-848) is served: group.version is at least 1.
func (b *Broker) consumerGroupsServed() bool { return b.featureLevel(GroupVersionFeature) >= 1 }
