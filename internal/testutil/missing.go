package testutil

import (
	"os"
	"strings"
	"testing"
)

// UnderCI reports whether the CI variable is set: there every tool the
// tests drive is installed (.ci/run installs them).
func UnderCI() bool {
	v := strings.ToLower(os.Getenv("CI"))
	return v != "" && v != "0" && v != "false"
}

// Missing skips the test because a tool it needs is not there, or fails
// it under CI, where it must be.
func Missing(t testing.TB, msg string) {
	t.Helper()
	if UnderCI() {
		t.Fatalf("%s: CI is set, so it must be installed (.ci/run installs it)", msg)
	}
	t.Skipf("SKIP: %s (run .ci/run as root to install it)", msg)
}

// NeedRoot skips the test when it does not run as root, saying what needs
// root, or fails it under CI, which runs as root.
func NeedRoot(t testing.TB, what string) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if UnderCI() {
		t.Fatalf("%s needs root: CI is set, so it must run as root", what)
	}
	t.Skipf("SKIP: %s needs root", what)
}
