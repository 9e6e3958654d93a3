package acl

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/model"
)

func allow(rt kmsg.ACLResourceType, pt kmsg.ACLResourcePatternType, name, principal, host string, op kmsg.ACLOperation) model.ACLBinding {
	return model.ACLBinding{ResourceType: int8(rt), ResourceName: name, PatternType: int8(pt), Principal: principal,
		Host: host, Operation: int8(op), Permission: int8(kmsg.ACLPermissionTypeAllow)}
}

func deny(rt kmsg.ACLResourceType, pt kmsg.ACLResourcePatternType, name, principal, host string, op kmsg.ACLOperation) model.ACLBinding {
	b := allow(rt, pt, name, principal, host, op)
	b.Permission = int8(kmsg.ACLPermissionTypeDeny)
	return b
}

const (
	literal  = kmsg.ACLResourcePatternTypeLiteral
	prefixed = kmsg.ACLResourcePatternTypePrefixed
)

// The expectations follow Kafka's documented authorizer rules.
func TestAuthorized(t *testing.T) {
	bindings := []model.ACLBinding{
		allow(Topic, literal, "orders", "User:alice", "*", Read),
		allow(Topic, prefixed, "logs-", "User:bob", "*", Write),
		deny(Topic, literal, "logs-secret", "User:bob", "*", Write),
		allow(Topic, literal, "*", "User:carol", "*", Describe),
		allow(Topic, literal, "pinned", "User:dave", "10.0.0.1", All),
		allow(Group, literal, "g", "User:*", "*", Read),
		deny(Group, literal, "g", "User:mallory", "*", All),
		allow(Topic, literal, "configs", "User:erin", "*", AlterConfigs),
		allow(Cluster, literal, ClusterName, "User:frank", "*", Create),
	}
	a := New(bindings, []string{"User:admin"}, false)
	for _, tc := range []struct {
		principal, host string
		op              kmsg.ACLOperation
		rt              kmsg.ACLResourceType
		name            string
		want            bool
	}{
		{"User:alice", "1.2.3.4", Read, Topic, "orders", true},
		{"User:alice", "1.2.3.4", Describe, Topic, "orders", true}, // READ implies DESCRIBE
		{"User:alice", "1.2.3.4", Write, Topic, "orders", false},
		{"User:alice", "1.2.3.4", Read, Topic, "orders2", false}, // literal is exact
		{"User:bob", "1.2.3.4", Write, Topic, "logs-app", true},  // prefixed
		{"User:bob", "1.2.3.4", Describe, Topic, "logs-app", true},
		{"User:bob", "1.2.3.4", Write, Topic, "logs-secret", false}, // deny wins
		{"User:bob", "1.2.3.4", Write, Topic, "logs", false},
		{"User:carol", "1.2.3.4", Describe, Topic, "anything", true}, // wildcard name
		{"User:carol", "1.2.3.4", Read, Topic, "anything", false},    // DESCRIBE implies nothing
		{"User:dave", "10.0.0.1", Delete, Topic, "pinned", true},     // ALL
		{"User:dave", "10.0.0.2", Delete, Topic, "pinned", false},    // host
		{"User:zoe", "1.2.3.4", Read, Group, "g", true},              // wildcard principal
		{"User:mallory", "1.2.3.4", Read, Group, "g", false},         // deny ALL
		{"User:mallory", "1.2.3.4", Describe, Group, "g", false},
		{"User:erin", "1.2.3.4", DescribeConfigs, Topic, "configs", true}, // ALTER_CONFIGS implies DESCRIBE_CONFIGS
		{"User:erin", "1.2.3.4", Describe, Topic, "configs", false},
		{"User:frank", "1.2.3.4", Create, Cluster, ClusterName, true},
		{"User:admin", "1.2.3.4", Delete, Cluster, ClusterName, true}, // super user
		{"User:zoe", "1.2.3.4", Read, Group, "no-acl", false},         // no ACL: denied by default
		{"User:zoe", "1.2.3.4", Read, TransactionalID, "t", false},
	} {
		if got := a.Authorized(tc.principal, tc.host, tc.op, tc.rt, tc.name); got != tc.want {
			t.Errorf("%s from %s %s %s %q: %v, want %v", tc.principal, tc.host, tc.op, tc.rt, tc.name, got, tc.want)
		}
	}
	open := New(bindings, nil, true)
	if !open.Authorized("User:zoe", "h", Read, Group, "no-acl") {
		t.Error("allow.everyone.if.no.acl.found: a resource no entry names is open")
	}
	if open.Authorized("User:zoe", "h", Read, Topic, "orders") {
		t.Error("allow.everyone.if.no.acl.found: a resource with entries keeps them")
	}
	var none *Authorizer
	if !none.Authorized("User:zoe", "h", Delete, Topic, "orders") || none.Enabled() {
		t.Error("no authorizer allows everything")
	}
}

func TestAuthorizedByType(t *testing.T) {
	for _, tc := range []struct {
		name     string
		bindings []model.ACLBinding
		want     bool
	}{
		{"none", nil, false},
		{"a literal allow", []model.ACLBinding{allow(Topic, literal, "t", "User:p", "*", Write)}, true},
		{"denied by the same literal", []model.ACLBinding{allow(Topic, literal, "t", "User:p", "*", Write),
			deny(Topic, literal, "t", "User:p", "*", Write)}, false},
		{"denied by a prefix", []model.ACLBinding{allow(Topic, literal, "tx", "User:p", "*", Write),
			deny(Topic, prefixed, "t", "User:p", "*", Write)}, false},
		{"a prefix allowed, a longer one denied", []model.ACLBinding{allow(Topic, prefixed, "t", "User:p", "*", Write),
			deny(Topic, prefixed, "tx", "User:p", "*", Write)}, true},
		{"denied everywhere", []model.ACLBinding{allow(Topic, prefixed, "t", "User:p", "*", Write),
			deny(Topic, literal, "*", "User:p", "*", All)}, false},
		{"another operation", []model.ACLBinding{allow(Topic, literal, "t", "User:p", "*", Read)}, false},
		{"another principal", []model.ACLBinding{allow(Topic, literal, "t", "User:q", "*", Write)}, false},
	} {
		if got := New(tc.bindings, nil, false).AuthorizedByType("User:p", "h", Write, Topic); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestOperations(t *testing.T) {
	a := New([]model.ACLBinding{allow(Topic, literal, "t", "User:p", "*", Read)}, nil, false)
	want := int32(1<<Read | 1<<Describe)
	if got := a.Operations("User:p", "h", Topic, "t"); got != want {
		t.Errorf("operations %b, want %b", got, want)
	}
}

func TestFilterMatches(t *testing.T) {
	str := func(s string) *string { return &s }
	lit := allow(Topic, literal, "orders", "User:p", "*", Read)
	wild := allow(Topic, literal, "*", "User:p", "*", Read)
	pre := allow(Topic, prefixed, "ord", "User:p", "*", Read)
	any := Filter{ResourceType: kmsg.ACLResourceTypeAny, PatternType: kmsg.ACLResourcePatternTypeAny,
		Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny}
	for _, tc := range []struct {
		name   string
		filter func(f Filter) Filter
		want   [3]bool // lit, wild, pre
	}{
		{"any", func(f Filter) Filter { return f }, [3]bool{true, true, true}},
		{"any pattern by name", func(f Filter) Filter { f.ResourceName = str("orders"); return f }, [3]bool{true, false, false}},
		{"match", func(f Filter) Filter {
			f.ResourceName, f.PatternType = str("orders"), kmsg.ACLResourcePatternTypeMatch
			return f
		}, [3]bool{true, true, true}},
		{"prefixed", func(f Filter) Filter { f.PatternType = kmsg.ACLResourcePatternTypePrefixed; return f }, [3]bool{false, false, true}},
		{"another principal", func(f Filter) Filter { f.Principal = str("User:q"); return f }, [3]bool{}},
		{"deny", func(f Filter) Filter { f.Permission = kmsg.ACLPermissionTypeDeny; return f }, [3]bool{}},
		{"group", func(f Filter) Filter { f.ResourceType = Group; return f }, [3]bool{}},
		{"read", func(f Filter) Filter { f.Operation = Read; return f }, [3]bool{true, true, true}},
	} {
		f := tc.filter(any)
		got := [3]bool{f.Matches(lit), f.Matches(wild), f.Matches(pre)}
		if got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestValidate(t *testing.T) {
	good := allow(Topic, literal, "t", "User:p", "*", Read)
	if err := Validate(good); err != nil {
		t.Fatal(err)
	}
	for name, change := range map[string]func(b *model.ACLBinding){
		"any resource type":       func(b *model.ACLBinding) { b.ResourceType = int8(kmsg.ACLResourceTypeAny) },
		"match pattern":           func(b *model.ACLBinding) { b.PatternType = int8(kmsg.ACLResourcePatternTypeMatch) },
		"any operation":           func(b *model.ACLBinding) { b.Operation = int8(kmsg.ACLOperationAny) },
		"any permission":          func(b *model.ACLBinding) { b.Permission = int8(kmsg.ACLPermissionTypeAny) },
		"empty name":              func(b *model.ACLBinding) { b.ResourceName = "" },
		"no principal type":       func(b *model.ACLBinding) { b.Principal = "alice" },
		"cluster of another name": func(b *model.ACLBinding) { b.ResourceType, b.ResourceName = int8(Cluster), "c" },
	} {
		b := good
		change(&b)
		if err := Validate(b); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
