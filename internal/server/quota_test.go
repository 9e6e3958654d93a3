package server_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/testutil"
)

// TestClientQuotaAdmin: AlterClientQuotas stores valid entries and refuses
// what Kafka refuses, entry by entry, with its messages; ValidateOnly
// stores nothing; DescribeClientQuotas matches entities as Kafka does
// (exact, default, any; strict or not).
func TestClientQuotaAdmin(t *testing.T) {
	b := testutil.StartBroker(t, nil)
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	str := kmsg.StringPtr
	type part = kmsg.AlterClientQuotasRequestEntryEntity
	type op = kmsg.AlterClientQuotasRequestEntryOp
	entry := func(parts []part, ops ...op) kmsg.AlterClientQuotasRequestEntry {
		return kmsg.AlterClientQuotasRequestEntry{Entity: parts, Ops: ops}
	}
	alter := func(validate bool, entries ...kmsg.AlterClientQuotasRequestEntry) []kmsg.AlterClientQuotasResponseEntry {
		t.Helper()
		req := kmsg.NewPtrAlterClientQuotasRequest()
		req.Entries, req.ValidateOnly = entries, validate
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Entries
	}
	res := alter(false,
		entry([]part{{Type: "user", Name: str("alice")}}, op{Key: "producer_byte_rate", Value: 1024}, op{Key: "request_percentage", Value: 12.5}),
		entry([]part{{Type: "user", Name: str("alice")}, {Type: "client-id"}}, op{Key: "consumer_byte_rate", Value: 2048}),
		entry([]part{{Type: "client-id"}}, op{Key: "producer_byte_rate", Value: 4096}),
		entry([]part{{Type: "ip", Name: str("10.0.0.1")}}, op{Key: "connection_creation_rate", Value: 5}),
		entry(nil, op{Key: "producer_byte_rate", Value: 1}),
		entry([]part{{Type: "group", Name: str("g")}}, op{Key: "producer_byte_rate", Value: 1}),
		entry([]part{{Type: "user", Name: str("a")}, {Type: "user", Name: str("b")}}, op{Key: "producer_byte_rate", Value: 1}),
		entry([]part{{Type: "ip", Name: str("10.0.0.2")}, {Type: "user", Name: str("a")}}, op{Key: "producer_byte_rate", Value: 1}),
		entry([]part{{Type: "ip", Name: str("not an ip")}}, op{Key: "connection_creation_rate", Value: 1}),
		entry([]part{{Type: "user", Name: str("bob")}}, op{Key: "bogus_rate", Value: 1}),
		entry([]part{{Type: "user", Name: str("bob")}}, op{Key: "producer_byte_rate", Value: 1.5}),
		entry([]part{{Type: "user", Name: str("bob")}}, op{Key: "producer_byte_rate", Value: -1}),
		entry([]part{{Type: "ip", Name: str("10.0.0.3")}}, op{Key: "producer_byte_rate", Value: 1}),
	)
	for i, want := range []string{"", "", "", "", "empty", "entity type", "Duplicate", "combination", "valid IP",
		"configuration key", "whole number", "positive", "configuration key"} {
		e := res[i]
		switch {
		case want == "" && e.ErrorCode != 0:
			t.Errorf("entry %d: %s %v", i, kerr.ErrorForCode(e.ErrorCode), e.ErrorMessage)
		case want != "" && (e.ErrorCode != kerr.InvalidRequest.Code || e.ErrorMessage == nil || !strings.Contains(*e.ErrorMessage, want)):
			t.Errorf("entry %d: code %d message %v, want INVALID_REQUEST with %q", i, e.ErrorCode, e.ErrorMessage, want)
		}
	}
	if r := alter(true, entry([]part{{Type: "user", Name: str("carol")}}, op{Key: "producer_byte_rate", Value: 1})); r[0].ErrorCode != 0 {
		t.Fatalf("validate only: %+v", r)
	}

	describe := func(strict bool, comps ...kmsg.DescribeClientQuotasRequestComponent) []string {
		t.Helper()
		req := kmsg.NewPtrDescribeClientQuotasRequest()
		req.Components, req.Strict = comps, strict
		resp, err := req.RequestWith(ctx, cl)
		if err != nil || resp.ErrorCode != 0 {
			t.Fatalf("describe: %v %+v", err, resp)
		}
		var out []string
		for _, e := range resp.Entries {
			var parts []string
			for _, p := range e.Entity {
				name := "<default>"
				if p.Name != nil {
					name = *p.Name
				}
				parts = append(parts, p.Type+"="+name)
			}
			for _, v := range e.Values {
				parts = append(parts, v.Key)
			}
			out = append(out, strings.Join(parts, ","))
		}
		return out
	}
	exact := func(typ, name string) kmsg.DescribeClientQuotasRequestComponent {
		return kmsg.DescribeClientQuotasRequestComponent{EntityType: typ, MatchType: kmsg.QuotasMatchTypeExact, Match: str(name)}
	}
	def := func(typ string) kmsg.DescribeClientQuotasRequestComponent {
		return kmsg.DescribeClientQuotasRequestComponent{EntityType: typ, MatchType: kmsg.QuotasMatchTypeDefault}
	}
	anyOf := func(typ string) kmsg.DescribeClientQuotasRequestComponent {
		return kmsg.DescribeClientQuotasRequestComponent{EntityType: typ, MatchType: kmsg.QuotasMatchTypeAny}
	}
	for _, tc := range []struct {
		name   string
		strict bool
		comps  []kmsg.DescribeClientQuotasRequestComponent
		want   int
	}{
		{"everything", false, nil, 4},
		{"alice, strictly", true, []kmsg.DescribeClientQuotasRequestComponent{exact("user", "alice")}, 1},
		{"alice with anything", false, []kmsg.DescribeClientQuotasRequestComponent{exact("user", "alice")}, 2},
		{"default client ids", false, []kmsg.DescribeClientQuotasRequestComponent{def("client-id")}, 2},
		{"any client id, strictly", true, []kmsg.DescribeClientQuotasRequestComponent{anyOf("client-id")}, 1},
		{"ips", false, []kmsg.DescribeClientQuotasRequestComponent{anyOf("ip")}, 1},
		{"carol (validated only)", false, []kmsg.DescribeClientQuotasRequestComponent{exact("user", "carol")}, 0},
	} {
		if got := describe(tc.strict, tc.comps...); len(got) != tc.want {
			t.Errorf("%s: %v, want %d entities", tc.name, got, tc.want)
		}
	}
	// Removing every value drops the entity.
	if r := alter(false, entry([]part{{Type: "client-id"}}, op{Key: "producer_byte_rate", Remove: true})); r[0].ErrorCode != 0 {
		t.Fatalf("remove: %+v", r)
	}
	if got := describe(true, anyOf("client-id")); len(got) != 0 {
		t.Fatalf("after removing its only value: %v", got)
	}
}

// TestConnectionCreationRate: an IP's connection_creation_rate quota
// closes its new connections over the rate at once (KIP-612), and the
// ones within it are served.
func TestConnectionCreationRate(t *testing.T) {
	b := testutil.StartBroker(t, nil)
	setQuota(t, b.Addr, kmsg.AlterClientQuotasRequestEntryEntity{Type: "ip", Name: kmsg.StringPtr("127.0.0.1")},
		"connection_creation_rate", 1)
	served := 0
	for range 30 {
		c := dialRaw(t, b.Addr)
		c.send(kmsg.NewPtrApiVersionsRequest())
		if _, err := c.readFrame(2 * time.Second); err == nil {
			served++
		}
		c.nc.Close()
	}
	// A new rate counts over at least 10 of its 11 windows: about 10
	// connections pass at once, then one a second.
	if served < 5 || served > 13 {
		t.Fatalf("%d of 30 connections opened at once were served at 1 a second", served)
	}
}

// TestControllerMutationRate: with controller_mutation_rate, topics
// created past the quota are THROTTLING_QUOTA_EXCEEDED (KIP-599) and the
// answer carries the time to wait; the ones within it are created.
func TestControllerMutationRate(t *testing.T) {
	b := testutil.StartBroker(t, nil)
	cl := setQuota(t, b.Addr, kmsg.AlterClientQuotasRequestEntryEntity{Type: "client-id"}, "controller_mutation_rate", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	create := kmsg.NewPtrCreateTopicsRequest()
	for i := range 20 {
		ct := kmsg.NewCreateTopicsRequestTopic()
		ct.Topic, ct.NumPartitions, ct.ReplicationFactor = fmt.Sprintf("mut-%d", i), 1, 1
		create.Topics = append(create.Topics, ct)
	}
	resp, err := create.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	created, throttled := 0, 0
	for _, st := range resp.Topics {
		switch st.ErrorCode {
		case 0:
			created++
		case kerr.ThrottlingQuotaExceeded.Code:
			throttled++
		default:
			t.Fatalf("%s: %s", st.Topic, kerr.ErrorForCode(st.ErrorCode))
		}
	}
	// A new rate counts over at least 10 s: about 10 partitions pass.
	if created < 8 || created > 12 || throttled != 20-created || resp.ThrottleMillis <= 0 {
		t.Fatalf("%d created, %d throttled, throttle %d ms", created, throttled, resp.ThrottleMillis)
	}
	if _, ok := b.Server().Metadata().Topic("mut-19"); ok {
		t.Fatal("a throttled topic was created")
	}
}

// setQuota sets one quota value of an entity and returns the client that
// set it.
func setQuota(t *testing.T, addr string, entity kmsg.AlterClientQuotasRequestEntryEntity, key string, value float64) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req := kmsg.NewPtrAlterClientQuotasRequest()
	req.Entries = []kmsg.AlterClientQuotasRequestEntry{{Entity: []kmsg.AlterClientQuotasRequestEntryEntity{entity},
		Ops: []kmsg.AlterClientQuotasRequestEntryOp{{Key: key, Value: value}}}}
	if resp, err := req.RequestWith(ctx, cl); err != nil || resp.Entries[0].ErrorCode != 0 {
		t.Fatalf("setting %s: %v %+v", key, err, resp)
	}
	return cl
}
