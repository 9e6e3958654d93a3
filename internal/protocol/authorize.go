package protocol

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/acl"
)

// What every handler checks before it acts: the ACL rules of the cluster
// metadata, rebuilt when they change, applied to the request's principal
// and host with Kafka's authorizer semantics (internal/acl).

// builtAuthorizer is the authorizer for the ACLs of one epoch.
type builtAuthorizer struct {
	epoch int64
	a     *acl.Authorizer
}

// authorizer returns the ACL rules in force; nil (everything allowed) when
// no authorizer is configured.
func (b *Broker) authorizer() *acl.Authorizer {
	b.aclOnce.Do(func() {
		kind, _ := b.Config.AuthorizerKind()
		b.aclOn = kind != ""
	})
	if !b.aclOn {
		return nil
	}
	epoch := b.Cluster.ACLsEpoch()
	if cur := b.authz.Load(); cur != nil && cur.epoch == epoch {
		return cur.a
	}
	bindings, epoch := b.Cluster.ACLs()
	supers := append(b.Config.SuperUserList(), "User:"+acl.InternalUser)
	built := &builtAuthorizer{epoch: epoch, a: acl.New(bindings, supers, b.Config.AllowEveryoneIfNoACL)}
	b.authz.Store(built)
	return built.a
}

// allowed reports whether the request's principal may do op on the
// resource.
func (b *Broker) allowed(r *Request, op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) bool {
	return b.authorizer().Authorized(r.principal(), r.Host, op, rt, name)
}

// allowedCluster reports whether the request's principal may do op on the
// cluster.
func (b *Broker) allowedCluster(r *Request, op kmsg.ACLOperation) bool {
	return b.allowed(r, op, acl.Cluster, acl.ClusterName)
}

// topicCheck returns whether the request's principal may do op on a
// topic, keeping its answers for the request's other partitions.
func (b *Broker) topicCheck(r *Request, op kmsg.ACLOperation) func(topic string) bool {
	if b.authorizer() == nil {
		return func(string) bool { return true }
	}
	known := map[string]bool{}
	return func(topic string) bool {
		ok, seen := known[topic]
		if !seen {
			ok = b.allowed(r, op, acl.Topic, topic)
			known[topic] = ok
		}
		return ok
	}
}

// authorizedOperations is the bit field of what the principal may do on
// the resource, for the responses that carry one when asked.
func (b *Broker) authorizedOperations(r *Request, rt kmsg.ACLResourceType, name string) int32 {
	a := b.authorizer()
	if a == nil {
		return acl.New(nil, nil, true).Operations(r.principal(), r.Host, rt, name)
	}
	return a.Operations(r.principal(), r.Host, rt, name)
}

func (r *Request) principal() string {
	if r.Principal == "" {
		return acl.Anonymous
	}
	return r.Principal
}

// configAccess checks op (DESCRIBE_CONFIGS or ALTER_CONFIGS) on a config
// resource as Kafka does: a topic's on the topic, a group's on the group,
// the others (brokers, loggers, client metrics) on the cluster. It returns
// the error to answer, nil when allowed.
func (b *Broker) configAccess(r *Request, op kmsg.ACLOperation, typ kmsg.ConfigResourceType, name string) error {
	switch typ {
	case kmsg.ConfigResourceTypeTopic:
		if !b.allowed(r, op, acl.Topic, name) {
			return kerr.TopicAuthorizationFailed
		}
	case kmsg.ConfigResourceTypeGroupConfig:
		if !b.allowed(r, op, acl.Group, name) {
			return kerr.GroupAuthorizationFailed
		}
	default:
		if !b.allowedCluster(r, op) {
			return kerr.ClusterAuthorizationFailed
		}
	}
	return nil
}
