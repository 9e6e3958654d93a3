package acl

import (
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/model"
)

// Authorizer answers whether a principal may do an operation on a
// resource. A nil *Authorizer allows everything: no authorizer is
// configured.
type Authorizer struct {
	superUsers   map[string]bool
	allowIfNoACL bool
	byType       map[int8]*typeIndex
}

// typeIndex holds one resource type's entries by pattern.
type typeIndex struct {
	literal  map[string][]model.ACLBinding // by resource name, "*" included
	prefixed []model.ACLBinding
}

// New builds an authorizer over bindings. superUsers may do everything;
// allowIfNoACL lets everyone do anything on a resource no entry names
// (allow.everyone.if.no.acl.found).
func New(bindings []model.ACLBinding, superUsers []string, allowIfNoACL bool) *Authorizer {
	a := &Authorizer{superUsers: map[string]bool{}, allowIfNoACL: allowIfNoACL, byType: map[int8]*typeIndex{}}
	for _, u := range superUsers {
		a.superUsers[u] = true
	}
	for _, b := range bindings {
		ix := a.byType[b.ResourceType]
		if ix == nil {
			ix = &typeIndex{literal: map[string][]model.ACLBinding{}}
			a.byType[b.ResourceType] = ix
		}
		if kmsg.ACLResourcePatternType(b.PatternType) == kmsg.ACLResourcePatternTypePrefixed {
			ix.prefixed = append(ix.prefixed, b)
		} else {
			ix.literal[b.ResourceName] = append(ix.literal[b.ResourceName], b)
		}
	}
	return a
}

// Enabled reports whether requests are checked at all.
func (a *Authorizer) Enabled() bool { return a != nil }

// SuperUser reports whether principal may do everything.
func (a *Authorizer) SuperUser(principal string) bool { return a == nil || a.superUsers[principal] }

// Authorized reports whether principal, connected from host, may do op on
// the resource of type rt called name.
func (a *Authorizer) Authorized(principal, host string, op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) bool {
	if a.SuperUser(principal) {
		return true
	}
	entries := a.matching(rt, name)
	if len(entries) == 0 {
		return a.allowIfNoACL
	}
	for _, e := range entries {
		if e.Permission == int8(kmsg.ACLPermissionTypeDeny) && appliesTo(e, principal, host) &&
			(e.Operation == int8(op) || e.Operation == int8(All)) {
			return false
		}
	}
	for _, e := range entries {
		if e.Permission == int8(kmsg.ACLPermissionTypeAllow) && appliesTo(e, principal, host) && implies(kmsg.ACLOperation(e.Operation), op) {
			return true
		}
	}
	return false
}

// matching returns every entry on a pattern that covers the resource: its
// literal name, the wildcard, and the prefixes of its name.
func (a *Authorizer) matching(rt kmsg.ACLResourceType, name string) []model.ACLBinding {
	ix := a.byType[int8(rt)]
	if ix == nil {
		return nil
	}
	var out []model.ACLBinding
	out = append(out, ix.literal[name]...)
	if name != Wildcard {
		out = append(out, ix.literal[Wildcard]...)
	}
	for _, e := range ix.prefixed {
		if strings.HasPrefix(name, e.ResourceName) {
			out = append(out, e)
		}
	}
	return out
}

func appliesTo(e model.ACLBinding, principal, host string) bool {
	return (e.Principal == principal || e.Principal == WildcardPrincipal) && (e.Host == host || e.Host == Wildcard)
}

// implies reports whether an allow of granted allows op.
func implies(granted, op kmsg.ACLOperation) bool {
	if granted == op || granted == All {
		return true
	}
	switch op {
	case Describe:
		return granted == Read || granted == Write || granted == Delete || granted == Alter
	case DescribeConfigs:
		return granted == AlterConfigs
	}
	return false
}

// AuthorizedByType reports whether principal may do op on some resource of
// type rt: an allow of op (or ALL) on a pattern that no deny covers. It is
// how a producer that may write some topic may be idempotent (KIP-679).
func (a *Authorizer) AuthorizedByType(principal, host string, op kmsg.ACLOperation, rt kmsg.ACLResourceType) bool {
	if a.SuperUser(principal) {
		return true
	}
	ix := a.byType[int8(rt)]
	if ix == nil {
		return a.allowIfNoACL
	}
	var denyLiteral, denyPrefix, allowLiteral, allowPrefix []string
	collect := func(e model.ACLBinding) {
		if !appliesTo(e, principal, host) || (e.Operation != int8(op) && e.Operation != int8(All)) {
			return
		}
		prefixed := kmsg.ACLResourcePatternType(e.PatternType) == kmsg.ACLResourcePatternTypePrefixed
		switch {
		case e.Permission == int8(kmsg.ACLPermissionTypeDeny) && prefixed:
			denyPrefix = append(denyPrefix, e.ResourceName)
		case e.Permission == int8(kmsg.ACLPermissionTypeDeny):
			denyLiteral = append(denyLiteral, e.ResourceName)
		case prefixed:
			allowPrefix = append(allowPrefix, e.ResourceName)
		default:
			allowLiteral = append(allowLiteral, e.ResourceName)
		}
	}
	for _, es := range ix.literal {
		for _, e := range es {
			collect(e)
		}
	}
	for _, e := range ix.prefixed {
		collect(e)
	}
	deniedPrefix := func(name string) bool {
		for _, p := range denyPrefix {
			if strings.HasPrefix(name, p) {
				return true
			}
		}
		return false
	}
	for _, n := range denyLiteral {
		if n == Wildcard {
			return false
		}
	}
	for _, n := range allowPrefix {
		if !deniedPrefix(n) {
			return true
		}
	}
	for _, n := range allowLiteral {
		if n == Wildcard || (!deniedPrefix(n) && !slices.Contains(denyLiteral, n)) {
			return true
		}
	}
	return false
}

// operationsOf are the operations each resource type has, for the
// authorized-operations bit fields.
var operationsOf = map[kmsg.ACLResourceType][]kmsg.ACLOperation{
	Topic:           {Read, Write, Create, Delete, Alter, Describe, DescribeConfigs, AlterConfigs},
	Group:           {Read, Describe, Delete, DescribeConfigs, AlterConfigs},
	Cluster:         {Create, ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite, Alter, Describe},
	TransactionalID: {Describe, Write},
}

// Operations returns the bit field of the operations principal may do on
// the resource (bit n for operation code n), as Metadata, DescribeGroups
// and DescribeCluster give them.
func (a *Authorizer) Operations(principal, host string, rt kmsg.ACLResourceType, name string) int32 {
	var bits int32
	for _, op := range operationsOf[rt] {
		if a.Authorized(principal, host, op, rt, name) {
			bits |= 1 << op
		}
	}
	return bits
}
