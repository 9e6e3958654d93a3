package javatest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/strandlog/strand/internal/testutil"
)

var build struct {
	once sync.Once
	cp   string
	err  error
}

// Helper returns the java binary and the helper's class path, building
// test/java the first time a test of the binary asks.
func Helper(t testing.TB) (java, classpath string) {
	t.Helper()
	java = lookPath(t, "java", "apt-get install openjdk-17-jdk-headless")
	mvn := lookPath(t, "mvn", "apt-get install maven")
	build.once.Do(func() {
		dir := projectDir()
		if err := mavenPackage(dir, mvn, true, 5*time.Minute); err != nil {
			// Not resolved yet on this machine: fetch from Maven Central.
			t.Logf("offline Maven build failed (dependencies not in the local repository?), building online: %v", err)
			if err := mavenPackage(dir, mvn, false, 10*time.Minute); err != nil {
				build.err = fmt.Errorf("building test/java: %v", err)
				return
			}
		}
		jar := filepath.Join(dir, "target", "strand-compat.jar")
		if _, err := os.Stat(jar); err != nil {
			build.err = fmt.Errorf("building test/java: %v", err)
			return
		}
		build.cp = jar + string(os.PathListSeparator) + filepath.Join(dir, "target", "lib", "*")
	})
	if build.err != nil {
		t.Fatal(build.err)
	}
	return java, build.cp
}

// lookPath returns the path of an executable, or skips (fails under CI)
// saying how to install it.
func lookPath(t testing.TB, name, install string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		testutil.Missing(t, fmt.Sprintf("%s not found (install: %s)", name, install))
	}
	return path
}

// projectDir is test/java, found from this file so that a test package
// anywhere in the module can use the helper.
func projectDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "java")
}

// mavenPackage runs mvn package in dir, killed after timeout.
func mavenPackage(dir, mvn string, offline bool, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	args := []string{"-q", "-B", "package", "-DskipTests"}
	if offline {
		args = append(args, "-o")
	}
	cmd := exec.CommandContext(ctx, mvn, args...)
	cmd.Dir = dir
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		err = fmt.Errorf("killed after the %v time limit (%v)", timeout, err)
	}
	if err != nil {
		return fmt.Errorf("mvn %v: %v\n%s", args, err, out)
	}
	return nil
}
