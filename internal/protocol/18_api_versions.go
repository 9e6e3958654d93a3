package protocol

import (
	"context"

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
//     finalized at the broker's --transaction-version: at 2 clients use
//     KIP-890's transaction protocol, below it the older flow. No other
//     feature is advertised.

func init() { register(18, 0, 4, handleApiVersions) }

func handleApiVersions(_ context.Context, b *Broker, r *Request) (*Response, error) {
	req := r.Body.(*kmsg.ApiVersionsRequest)
	resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
	if req.Version >= 3 && (!validSoftware(req.ClientSoftwareName) || !validSoftware(req.ClientSoftwareVersion)) {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return reply(resp)
	}
	resp.ApiKeys = Ranges()
	sf := kmsg.NewApiVersionsResponseSupportedFeature()
	sf.Name, sf.MinVersion, sf.MaxVersion = transactionVersionFeature, 0, 2
	resp.SupportedFeatures = append(resp.SupportedFeatures, sf)
	// Features are fixed for the broker's life, so one epoch serves; it
	// must be above -1 for clients to take the finalized levels.
	resp.FinalizedFeaturesEpoch = 1
	if level := b.Config.TransactionVersion; level > 0 {
		ff := kmsg.NewApiVersionsResponseFinalizedFeature()
		ff.Name, ff.MinVersionLevel, ff.MaxVersionLevel = transactionVersionFeature, level, level
		resp.FinalizedFeatures = append(resp.FinalizedFeatures, ff)
	}
	return reply(resp)
}

const transactionVersionFeature = "transaction.version"

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
