package protocol

import (
	"context"
	"math"
	"net"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/acl"
	"github.com/strandlog/strand/internal/cluster"
)

// AlterClientQuotas: v0-1
//
// Behaviour:
//   - Each entry sets and removes quota values of one entity: a user, a
//     client id, both, or an IP, each by name or as the default of its
//     type (a null name). The keys are Kafka's: producer_byte_rate,
//     consumer_byte_rate, request_percentage and controller_mutation_rate
//     for users and client ids, connection_creation_rate for IPs. The
//     valid entries are stored together in one cluster metadata record and
//     apply on every broker; ValidateOnly checks without storing.
//   - INVALID_REQUEST, with Kafka's message: an unknown entity type, one
//     named twice, an IP with a user or client id, an empty entity, an
//     invalid IP, an unknown key, a key named twice, a value that is not
//     positive or (for the byte and connection rates) not whole.
//   - All are enforced (internal/quota): the byte rates and request
//     percentage with throttle times, the controller mutation rate on
//     CreateTopics, CreatePartitions and DeleteTopics (KIP-599), the
//     connection creation rate by closing an IP's new connections over it
//     (KIP-612).
//
// Authorization: ALTER_CONFIGS on the cluster (CLUSTER_AUTHORIZATION_FAILED
// for each entry).

func init() { register(49, 0, 1, handleAlterClientQuotas) }

// quotaKeys are the keys each entity type takes, and whether their values
// are whole numbers.
var quotaKeys = map[string]map[string]bool{
	"user":      {"producer_byte_rate": true, "consumer_byte_rate": true, "request_percentage": false, "controller_mutation_rate": false},
	"client-id": {"producer_byte_rate": true, "consumer_byte_rate": true, "request_percentage": false, "controller_mutation_rate": false},
	"ip":        {"connection_creation_rate": true},
}

func handleAlterClientQuotas(_ context.Context, b *Broker, r *Request) (*Response, error) {
	req := r.Body.(*kmsg.AlterClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.AlterClientQuotasResponse)
	allowed := b.allowedCluster(r, acl.AlterConfigs)
	errs := make([]error, len(req.Entries))
	var changes []cluster.ClientQuotaChange
	var at []int
	for i, e := range req.Entries {
		if !allowed {
			errs[i] = kerr.ClusterAuthorizationFailed
			continue
		}
		c, err := quotaChange(e)
		if err != nil {
			errs[i] = err
			continue
		}
		changes = append(changes, c)
		at = append(at, i)
	}
	if len(changes) > 0 && !req.ValidateOnly {
		if err := b.Cluster.AlterClientQuotas(changes); err != nil {
			for _, i := range at {
				errs[i] = err
			}
		}
		b.Quotas.Changed()
	}
	for i, e := range req.Entries {
		re := kmsg.NewAlterClientQuotasResponseEntry()
		re.ErrorCode, re.ErrorMessage = errorCode(errs[i]), errorMessage(errs[i])
		for _, p := range e.Entity {
			rp := kmsg.NewAlterClientQuotasResponseEntryEntity()
			rp.Type, rp.Name = p.Type, p.Name
			re.Entity = append(re.Entity, rp)
		}
		resp.Entries = append(resp.Entries, re)
	}
	return reply(resp)
}

// quotaChange checks one entry as Kafka's controller does.
func quotaChange(e kmsg.AlterClientQuotasRequestEntry) (cluster.ClientQuotaChange, error) {
	bad := func(format string, args ...any) (cluster.ClientQuotaChange, error) {
		return cluster.ClientQuotaChange{}, newAPIError(kerr.InvalidRequest, format, args...)
	}
	if len(e.Entity) == 0 {
		return bad("Invalid empty client quota entity")
	}
	var c cluster.ClientQuotaChange
	for _, p := range e.Entity {
		if quotaKeys[p.Type] == nil {
			return bad("Unhandled client quota entity type: %s", p.Type)
		}
		if slices.ContainsFunc(c.Entity, func(q cluster.QuotaEntityPart) bool { return q.Type == p.Type }) {
			return bad("Duplicate %s entity in client quota entity", p.Type)
		}
		part := cluster.QuotaEntityPart{Type: p.Type, Default: p.Name == nil}
		if p.Name != nil {
			part.Name = *p.Name
			if p.Type == "ip" && net.ParseIP(part.Name) == nil {
				return bad("%s is not a valid IP or resolvable host.", part.Name)
			}
		}
		c.Entity = append(c.Entity, part)
	}
	if len(c.Entity) > 1 && slices.ContainsFunc(c.Entity, func(q cluster.QuotaEntityPart) bool { return q.Type == "ip" }) {
		return bad("Invalid quota entity combination, IP entity should not be combined with User or ClientId")
	}
	slices.SortFunc(c.Entity, func(a, b cluster.QuotaEntityPart) int { return strings.Compare(a.Type, b.Type) })
	keys := quotaKeys[c.Entity[0].Type]
	seen := map[string]bool{}
	for _, op := range e.Ops {
		whole, ok := keys[op.Key]
		switch {
		case !ok:
			return bad("Invalid configuration key %s", op.Key)
		case seen[op.Key]:
			return bad("Duplicate quota key %s not updating quota for this entity", op.Key)
		case op.Remove:
			c.Remove = append(c.Remove, op.Key)
		case op.Value <= 0 || math.IsNaN(op.Value) || math.IsInf(op.Value, 0):
			return bad("Invalid value %v for quota key %s: it must be positive", op.Value, op.Key)
		case whole && op.Value != math.Trunc(op.Value):
			return bad("Invalid value %v for quota key %s: it must be a whole number", op.Value, op.Key)
		default:
			if c.Set == nil {
				c.Set = map[string]float64{}
			}
			c.Set[op.Key] = op.Value
		}
		seen[op.Key] = true
	}
	return c, nil
}
