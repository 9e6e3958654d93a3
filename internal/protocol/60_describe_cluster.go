package protocol

import (
	"context"
	"fmt"
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/acl"
)

// DescribeCluster: v0-2
//
// Behaviour:
//   - The cluster id, the registered brokers (unfenced ones; fenced ones too
//     with IncludeFencedBrokers, v2, marked IsFenced) with their racks, and
//     as controller this broker itself, as in Metadata (every broker takes
//     admin requests).
//   - EndpointType (v1+) 1 (brokers) is served; 2 (controllers) is
//     MISMATCHED_ENDPOINT_TYPE, as on a Kafka broker's listener; any other is
//     UNSUPPORTED_ENDPOINT_TYPE.
//   - Cluster authorized operations are -2147483648 (not computed) unless
//     asked for; asked, what the principal may do on the cluster (every
//     operation without an authorizer, as Kafka answers).
//
// Authorization: none needed, as in Kafka.

func init() { register(60, 0, 2, handleDescribeCluster) }

func handleDescribeCluster(_ context.Context, b *Broker, r *Request) (*Response, error) {
	req := r.Body.(*kmsg.DescribeClusterRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	resp.EndpointType = req.EndpointType
	switch req.EndpointType {
	case 1:
	case 2:
		resp.ErrorCode = kerr.MismatchedEndpointType.Code
		resp.ErrorMessage = kmsg.StringPtr("The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type CONTROLLER")
		return reply(resp)
	default:
		resp.ErrorCode = kerr.UnsupportedEndpointType.Code
		resp.ErrorMessage = kmsg.StringPtr(fmt.Sprintf("Unsupported endpoint type %d", req.EndpointType))
		return reply(resp)
	}
	resp.ClusterID = b.Cluster.ClusterID()
	resp.ControllerID = b.Config.NodeID
	for _, cb := range b.Cluster.Brokers() {
		if cb.Fenced && !req.IncludeFencedBrokers {
			continue
		}
		ep, ok := cb.Endpoint(r.Listener)
		if !ok {
			continue
		}
		br := kmsg.NewDescribeClusterResponseBroker()
		br.NodeID, br.Host, br.Port, br.IsFenced = cb.NodeID, ep.Host, ep.Port, cb.Fenced
		if cb.Rack != "" {
			br.Rack = kmsg.StringPtr(cb.Rack)
		}
		resp.Brokers = append(resp.Brokers, br)
	}
	resp.ClusterAuthorizedOperations = math.MinInt32
	if req.IncludeClusterAuthorizedOperations {
		resp.ClusterAuthorizedOperations = b.authorizedOperations(r, acl.Cluster, acl.ClusterName)
	}
	return reply(resp)
}
