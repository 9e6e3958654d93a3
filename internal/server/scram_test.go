package server_test

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/scram"
	"github.com/strandlog/strand/internal/testutil"
)

// TestScramCredentials: users' SCRAM credentials are set, described (the
// mechanisms and iterations, nothing secret), checked as Kafka checks them,
// kept across a restart and deleted; the broker keeps the keys derived
// from the password, not the password.
func TestScramCredentials(t *testing.T) {
	b := testutil.StartBroker(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin := func() *kadm.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return kadm.NewClient(cl)
	}
	adm := admin()
	res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: "alice", Mechanism: kadm.ScramSha512, Iterations: 8192, Password: "alice-secret"},
		{User: "bob", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "bob-secret"},
	})
	if err != nil {
		t.Fatal(err)
	}
	for u, r := range res {
		if r.Err != nil {
			t.Fatalf("%s: %v", u, r.Err)
		}
	}
	d, err := adm.DescribeUserSCRAMs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(d) != 2 || len(d["alice"].CredInfos) != 1 || d["alice"].CredInfos[0].Mechanism != kadm.ScramSha512 ||
		d["alice"].CredInfos[0].Iterations != 8192 || d["bob"].CredInfos[0].Mechanism != kadm.ScramSha256 {
		t.Fatalf("described %+v", d)
	}
	// The password checks against what is kept, and is not kept.
	c := b.Server().Metadata().ScramCredentials()["alice"][int8(scram.SHA512)]
	salted, err := scram.SHA512.SaltedPassword("alice-secret", c.Salt, c.Iterations)
	if err != nil {
		t.Fatal(err)
	}
	if want := scram.SHA512.FromSaltedPassword(salted, c.Salt, c.Iterations); !bytes.Equal(want.StoredKey, c.StoredKey) ||
		!bytes.Equal(want.ServerKey, c.ServerKey) {
		t.Fatal("the stored keys are not the password's")
	}

	// What Kafka refuses, user by user (sent as is: kadm checks some of
	// it itself).
	req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	del := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
	del.Name, del.Mechanism = "carol", 1
	req.Deletions = append(req.Deletions, del)
	for _, u := range []struct {
		name       string
		mech       int8
		iterations int32
	}{{"dave", 1, 100}, {"erin", 1, 4096}, {"frank", 9, 4096}, {"grace", 2, 4096}, {"grace", 2, 4096}, {"", 1, 4096}} {
		up := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
		up.Name, up.Mechanism, up.Iterations, up.Salt, up.SaltedPassword = u.name, u.mech, u.iterations, []byte("salt"), []byte("salted")
		req.Upsertions = append(req.Upsertions, up)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	raw, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int16{}
	for _, r := range raw.Results {
		got[r.User] = r.ErrorCode
	}
	want := map[string]int16{"carol": kerr.ResourceNotFound.Code, "dave": kerr.UnacceptableCredential.Code, "erin": 0,
		"frank": kerr.UnsupportedSaslMechanism.Code, "grace": kerr.DuplicateResource.Code, "": kerr.UnacceptableCredential.Code}
	if !maps.Equal(got, want) || len(raw.Results) != len(want) {
		t.Errorf("results %v, want %v", got, want)
	}
	if d, _ := adm.DescribeUserSCRAMs(ctx, "nobody"); !errors.Is(d["nobody"].Err, kerr.ResourceNotFound) {
		t.Errorf("describing a user without credentials: %+v", d["nobody"])
	}

	b.Restart(t)
	adm = admin()
	if d, err := adm.DescribeUserSCRAMs(ctx); err != nil || len(d) != 3 {
		t.Fatalf("after a restart: %+v %v", d, err)
	}
	if _, err := adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "alice", Mechanism: kadm.ScramSha512}}, nil); err != nil {
		t.Fatal(err)
	}
	if d, _ := adm.DescribeUserSCRAMs(ctx); len(d) != 2 || d["alice"].User != "" {
		t.Fatalf("after deleting alice: %+v", d)
	}
}

// TestDescribeClientQuotas: with no quota ever set, a valid filter matches
// nothing and a bad one is INVALID_REQUEST, as Kafka checks it.
func TestDescribeClientQuotas(t *testing.T) {
	b := testutil.StartBroker(t, nil)
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ask := func(typ string, match kmsg.QuotasMatchType, name *string) *kmsg.DescribeClientQuotasResponse {
		t.Helper()
		req := kmsg.NewPtrDescribeClientQuotasRequest()
		c := kmsg.NewDescribeClientQuotasRequestComponent()
		c.EntityType, c.MatchType, c.Match = typ, match, name
		req.Components = append(req.Components, c)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	if r := ask("user", kmsg.QuotasMatchTypeExact, kmsg.StringPtr("alice")); r.ErrorCode != 0 || len(r.Entries) != 0 {
		t.Errorf("a user's quotas: %+v", r)
	}
	if r := ask("user", kmsg.QuotasMatchTypeAny, nil); r.ErrorCode != 0 || len(r.Entries) != 0 {
		t.Errorf("every user's quotas: %+v", r)
	}
	for _, bad := range []struct {
		typ   string
		match kmsg.QuotasMatchType
		name  *string
	}{{"group", kmsg.QuotasMatchTypeAny, nil}, {"user", kmsg.QuotasMatchTypeExact, nil}, {"user", kmsg.QuotasMatchTypeDefault, kmsg.StringPtr("x")}} {
		if r := ask(bad.typ, bad.match, bad.name); r.ErrorCode != kerr.InvalidRequest.Code {
			t.Errorf("filter %+v: error %d, want INVALID_REQUEST", bad, r.ErrorCode)
		}
	}
}
