package acl

import (
	"errors"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/model"
)

// Short names for Kafka's codes, as the handlers use them.
const (
	Topic           = kmsg.ACLResourceTypeTopic
	Group           = kmsg.ACLResourceTypeGroup
	Cluster         = kmsg.ACLResourceTypeCluster
	TransactionalID = kmsg.ACLResourceTypeTransactionalId

	All             = kmsg.ACLOperationAll
	Read            = kmsg.ACLOperationRead
	Write           = kmsg.ACLOperationWrite
	Create          = kmsg.ACLOperationCreate
	Delete          = kmsg.ACLOperationDelete
	Alter           = kmsg.ACLOperationAlter
	Describe        = kmsg.ACLOperationDescribe
	ClusterAction   = kmsg.ACLOperationClusterAction
	DescribeConfigs = kmsg.ACLOperationDescribeConfigs
	AlterConfigs    = kmsg.ACLOperationAlterConfigs
	IdempotentWrite = kmsg.ACLOperationIdempotentWrite
)

// ClusterName is the one name of the cluster resource.
const ClusterName = "kafka-cluster"

// Wildcard is the resource name, and the host, that match every one;
// WildcardPrincipal the principal that matches every user.
const (
	Wildcard          = "*"
	WildcardPrincipal = "User:*"
)

// Anonymous is the principal of a connection that did not authenticate.
const Anonymous = "User:ANONYMOUS"

// InternalUser is the user the broker's own clients authenticate as (the
// web console, the admin API's reads); its credential lives in the broker
// process only, and it passes every check.
const InternalUser = "__strand_broker"

// ErrInvalid is the kind of a binding or filter Kafka refuses
// (INVALID_REQUEST).
var ErrInvalid = errors.New("invalid ACL")

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// Validate checks a binding to be created as Kafka's controller does.
func Validate(b model.ACLBinding) error {
	switch rt := kmsg.ACLResourceType(b.ResourceType); rt {
	case Topic, Group, Cluster, TransactionalID, kmsg.ACLResourceTypeDelegationToken, kmsg.ACLResourceTypeUser:
	default:
		return invalid("Invalid resourceType %s", rt)
	}
	switch pt := kmsg.ACLResourcePatternType(b.PatternType); pt {
	case kmsg.ACLResourcePatternTypeLiteral, kmsg.ACLResourcePatternTypePrefixed:
	default:
		return invalid("Invalid patternType %s", pt)
	}
	if op := kmsg.ACLOperation(b.Operation); op <= kmsg.ACLOperationAny || op > kmsg.ACLOperationDescribeTokens {
		return invalid("Invalid operation %s", op)
	}
	switch perm := kmsg.ACLPermissionType(b.Permission); perm {
	case kmsg.ACLPermissionTypeAllow, kmsg.ACLPermissionTypeDeny:
	default:
		return invalid("Invalid permissionType %s", perm)
	}
	if b.ResourceName == "" {
		return invalid("Resource name should not be empty")
	}
	if kmsg.ACLResourceType(b.ResourceType) == Cluster && b.ResourceName != ClusterName {
		return invalid("The only valid name for the CLUSTER resource is %s", ClusterName)
	}
	if !strings.Contains(b.Principal, ":") {
		return invalid("Could not parse principal from `%s` (no colon is present separating the principal type from the principal name)", b.Principal)
	}
	return nil
}

// Filter selects bindings, as DescribeAcls and DeleteAcls name them: a nil
// name, principal or host and the ANY codes match every value; the MATCH
// pattern type matches the bindings that apply to the named resource
// (literal, wildcard and prefixes of it).
type Filter struct {
	ResourceType kmsg.ACLResourceType
	ResourceName *string
	PatternType  kmsg.ACLResourcePatternType
	Principal    *string
	Host         *string
	Operation    kmsg.ACLOperation
	Permission   kmsg.ACLPermissionType
}

// ValidateFilter refuses filters with unknown codes.
func ValidateFilter(f Filter) error {
	if f.ResourceType == kmsg.ACLResourceTypeUnknown || f.ResourceType > kmsg.ACLResourceTypeUser {
		return invalid("Invalid resourceType %s", f.ResourceType)
	}
	if f.PatternType == kmsg.ACLResourcePatternTypeUnknown || f.PatternType > kmsg.ACLResourcePatternTypePrefixed {
		return invalid("Invalid patternType %s", f.PatternType)
	}
	if f.Operation == kmsg.ACLOperationUnknown || f.Operation > kmsg.ACLOperationDescribeTokens {
		return invalid("Invalid operation %s", f.Operation)
	}
	if f.Permission == kmsg.ACLPermissionTypeUnknown || f.Permission > kmsg.ACLPermissionTypeAllow {
		return invalid("Invalid permissionType %s", f.Permission)
	}
	return nil
}

// Matches reports whether the filter selects b.
func (f Filter) Matches(b model.ACLBinding) bool {
	if f.ResourceType != kmsg.ACLResourceTypeAny && int8(f.ResourceType) != b.ResourceType {
		return false
	}
	if !f.matchesPattern(b) {
		return false
	}
	if f.Principal != nil && *f.Principal != b.Principal {
		return false
	}
	if f.Host != nil && *f.Host != b.Host {
		return false
	}
	if f.Operation != kmsg.ACLOperationAny && int8(f.Operation) != b.Operation {
		return false
	}
	return f.Permission == kmsg.ACLPermissionTypeAny || int8(f.Permission) == b.Permission
}

func (f Filter) matchesPattern(b model.ACLBinding) bool {
	switch f.PatternType {
	case kmsg.ACLResourcePatternTypeAny:
		return f.ResourceName == nil || *f.ResourceName == b.ResourceName
	case kmsg.ACLResourcePatternTypeMatch:
		if f.ResourceName == nil {
			return true
		}
		name := *f.ResourceName
		switch kmsg.ACLResourcePatternType(b.PatternType) {
		case kmsg.ACLResourcePatternTypeLiteral:
			return b.ResourceName == name || b.ResourceName == Wildcard
		case kmsg.ACLResourcePatternTypePrefixed:
			return strings.HasPrefix(name, b.ResourceName)
		}
		return false
	default:
		return int8(f.PatternType) == b.PatternType && (f.ResourceName == nil || *f.ResourceName == b.ResourceName)
	}
}
