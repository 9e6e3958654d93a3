package protocol

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ApiVersions: v0-4
//
// Behaviour:
//   - Lists every API of the registry with its version range.
//   - A version above 4 is answered (by the server, before decoding) with a
//     v0 response carrying UNSUPPORTED_VERSION and the ApiVersions range,
//     as Kafka does (KIP-511), so the client retries at a version we speak.
//   - v3+: the client's software name and version must match Kafka's
//     pattern, else INVALID_REQUEST.
//
//   - v3+: the transaction.version feature (KIP-584), supported 0-2 and
//     finalized at the level the cluster metadata holds, with the epoch of
//     its last change: a single node's --transaction-version, a cluster's
//     first broker's (the others keep it). At 2 clients use KIP-890's
//     transaction protocol, below it the older flow.
//   - v3+: the share.version feature, supported 0-1 and finalized at 1
//     unless the cluster metadata holds another level, as in a cluster
//     Kafka 4.2 or later formats: the share group APIs (KIP-932) are
//     listed only at 1.
//   - v3+: the group.version feature, supported 0-1 and finalized at 1
//     unless the cluster metadata holds another level: at 1 the consumer
//     group protocol (KIP-848) is served. No other feature is advertised.
//     UpdateFeatures changes both.

func init() { register(18, 0, 4, handleApiVersions) }

func handleApiVersions(_ context.Context, b *Broker, r *Request) (*Response, error) {
	req := r.Body.(*kmsg.ApiVersionsRequest)
	resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
	if req.Version >= 3 && (!validSoftware(req.ClientSoftwareName) || !validSoftware(req.ClientSoftwareVersion)) {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return reply(resp)
	}
	resp.ApiKeys = Ranges()
	if !b.sharesServed() {
		resp.ApiKeys = slices.DeleteFunc(resp.ApiKeys, func(k kmsg.ApiVersionsResponseApiKey) bool {
			return slices.Contains(shareAPIs, k.ApiKey)
		})
	}
	for _, name := range featureNames {
		sf := kmsg.NewApiVersionsResponseSupportedFeature()
		sf.Name, sf.MinVersion, sf.MaxVersion = name, servedFeatures[name][0], servedFeatures[name][1]
		resp.SupportedFeatures = append(resp.SupportedFeatures, sf)
	}
	_, epoch, _ := b.Cluster.FeatureLevel(TransactionVersionFeature)
	// The epoch must be above -1 for clients to take the finalized levels.
	resp.FinalizedFeaturesEpoch = max(epoch, 1)
	for _, name := range featureNames {
		if level := b.featureLevel(name); level > 0 {
			ff := kmsg.NewApiVersionsResponseFinalizedFeature()
			ff.Name, ff.MinVersionLevel, ff.MaxVersionLevel = name, level, level
			resp.FinalizedFeatures = append(resp.FinalizedFeatures, ff)
		}
	}
	return reply(resp)
}

// GroupVersionFeature is the feature that enables the consumer group
// protocol (KIP-848).
const GroupVersionFeature = "group.version"

// TransactionVersionFeature is the feature that selects the transaction
// protocol.
const TransactionVersionFeature = "transaction.version"

// UnsupportedApiVersions answers an ApiVersions request of a version we do
// not know, in v0 form.
func UnsupportedApiVersions() kmsg.Response {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 0
	resp.ErrorCode = kerr.UnsupportedVersion.Code
	for _, k := range Ranges() {
		if k.ApiKey == 18 {
			resp.ApiKeys = append(resp.ApiKeys, k)
		}
	}
	return resp
}

// validSoftware matches [a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?
func validSoftware(s string) bool {
	if s == "" {
		return false
	}
	alnum := func(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' }
	if !alnum(s[0]) || !alnum(s[len(s)-1]) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !alnum(c) && c != '-' && c != '.' {
			return false
		}
	}
	return true
}
