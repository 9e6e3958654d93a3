package main

import (
	"debug/buildinfo"
	"encoding/json"
	"os/exec"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/strandlog/strand/internal/testutil"
)

// TestVersionLine: the version line carries the module version, the commit
// and whether the tree was modified, and the Go version, as the build
// information has them, and says "unknown" for a commit it does not have.
func TestVersionLine(t *testing.T) {
	for _, tc := range []struct {
		name string
		info *debug.BuildInfo
		ok   bool
		want string
	}{
		{"stamped", &debug.BuildInfo{GoVersion: "go1.26.1", Main: debug.Module{Version: "v1.4.0"}, Settings: []debug.BuildSetting{
			{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"}, {Key: "vcs.modified", Value: "false"}}},
			true, "v1.4.0, commit 0123456789abcdef0123456789abcdef01234567, go1.26.1 "},
		{"modified", &debug.BuildInfo{GoVersion: "go1.26.1", Main: debug.Module{Version: "v0.0.0-20260101000000-0123456789ab+dirty"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"}, {Key: "vcs.modified", Value: "true"}}},
			true, "v0.0.0-20260101000000-0123456789ab+dirty, commit 0123456789abcdef0123456789abcdef01234567 (modified), go1.26.1 "},
		{"not stamped", &debug.BuildInfo{GoVersion: "go1.26.1", Main: debug.Module{Version: "(devel)"}}, true, "devel, commit unknown, go1.26.1 "},
		{"no build information", nil, false, "devel, commit unknown, go"},
	} {
		if got := readBuildVersion(tc.info, tc.ok).String(); !strings.HasPrefix(got, tc.want) {
			t.Errorf("%s: %q, want it to start with %q", tc.name, got, tc.want)
		}
	}
}

// TestVersionCommand: the binary's strand version and strand --version
// print the same line, which says what the build information the Go
// toolchain wrote into that binary says; --format json gives its fields.
func TestVersionCommand(t *testing.T) {
	bin := testutil.Binary(t)
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	want := buildVersion{Version: "devel", Commit: "unknown", Go: info.GoVersion}
	if info.Main.Version != "(devel)" && info.Main.Version != "" {
		want.Version = info.Main.Version
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			want.Commit = s.Value
		case "vcs.modified":
			want.Modified = s.Value == "true"
		case "GOOS":
			want.Platform = s.Value + want.Platform
		case "GOARCH":
			want.Platform += "/" + s.Value
		}
	}
	run := func(args ...string) string {
		out, err := exec.Command(bin, args...).Output()
		if err != nil {
			t.Fatalf("strand %s: %v", strings.Join(args, " "), err)
		}
		return string(out)
	}
	line := run("version")
	if want := "strand version " + want.String() + "\n"; line != want {
		t.Errorf("strand version: %q, want %q", line, want)
	}
	if flag := run("--version"); flag != line {
		t.Errorf("strand --version: %q, strand version: %q", flag, line)
	}
	var got buildVersion
	if err := json.Unmarshal([]byte(run("version", "--format", "json")), &got); err != nil || got != want {
		t.Errorf("strand version --format json: %+v (%v), want %+v", got, err, want)
	}
}
