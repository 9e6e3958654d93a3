package main

import (
	"bytes"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// strandRun runs the strand command line in this process.
func strandRun(t *testing.T, args ...string) (string, error) {
	t.Helper()
	profileName = ""
	cmd := rootCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

// TestProfiles: profiles are created, listed, chosen and deleted, and the
// tools' brokers come from --brokers, then STRAND_BROKERS, then the
// profile (--profile, STRAND_PROFILE, the current one), then the local
// broker.
func TestProfiles(t *testing.T) {
	t.Setenv("STRAND_PROFILES", filepath.Join(t.TempDir(), "strand", "profiles.yaml"))
	t.Setenv("STRAND_BROKERS", "")
	t.Setenv("STRAND_PROFILE", "")
	brokers := func(flag string) []string {
		t.Helper()
		bs, err := seedBrokers(flag)
		if err != nil {
			t.Fatal(err)
		}
		return bs
	}
	if got := brokers(""); !slices.Equal(got, []string{localBroker}) {
		t.Fatalf("without profiles: %v", got)
	}
	if out, err := strandRun(t, "profile", "create", "prod", "--brokers", "p1:9092,p2:9092"); err != nil || !strings.Contains(out, "the current profile") {
		t.Fatalf("create prod: %q %v", out, err)
	}
	if out, err := strandRun(t, "profile", "create", "dev", "--brokers", "d1:9092"); err != nil || strings.Contains(out, "current") {
		t.Fatalf("create dev: %q %v", out, err)
	}
	if _, err := strandRun(t, "profile", "create", "dev", "--brokers", "x:1"); err == nil {
		t.Fatal("a second profile dev was created")
	}
	if got := brokers(""); !slices.Equal(got, []string{"p1:9092", "p2:9092"}) {
		t.Fatalf("the current profile: %v", got)
	}
	if out, _ := strandRun(t, "profile", "list"); !strings.Contains(out, "prod     p1:9092,p2:9092  *") {
		t.Fatalf("list:\n%s", out)
	}
	if _, err := strandRun(t, "profile", "use", "dev"); err != nil {
		t.Fatal(err)
	}
	if got := brokers(""); !slices.Equal(got, []string{"d1:9092"}) {
		t.Fatalf("after use dev: %v", got)
	}
	t.Setenv("STRAND_PROFILE", "prod")
	if got := brokers(""); got[0] != "p1:9092" {
		t.Fatalf("STRAND_PROFILE=prod: %v", got)
	}
	profileName = "dev"
	if got := brokers(""); got[0] != "d1:9092" {
		t.Fatalf("--profile dev: %v", got)
	}
	profileName = "nope"
	if _, err := seedBrokers(""); err == nil || !strings.Contains(err.Error(), `no profile "nope"`) {
		t.Fatalf("an unknown profile: %v", err)
	}
	t.Setenv("STRAND_BROKERS", "env:1")
	if got := brokers(""); got[0] != "env:1" {
		t.Fatalf("STRAND_BROKERS over the profile: %v", got)
	}
	if got := brokers("flag:1, flag:2"); !slices.Equal(got, []string{"flag:1", "flag:2"}) {
		t.Fatalf("--brokers over everything: %v", got)
	}
	profileName = ""
	t.Setenv("STRAND_BROKERS", "")
	t.Setenv("STRAND_PROFILE", "")
	if _, err := strandRun(t, "profile", "delete", "dev"); err != nil {
		t.Fatal(err)
	}
	if got := brokers(""); got[0] != localBroker {
		t.Fatalf("after deleting the current profile: %v", got)
	}
	if out, _ := strandRun(t, "profile", "list", "--format", "json"); !strings.Contains(out, `"name": "prod"`) || strings.Contains(out, "dev") {
		t.Fatalf("list --format json: %s", out)
	}
}
