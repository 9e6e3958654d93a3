package librdkafkatest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strandlog/strand/internal/testutil"
	"github.com/strandlog/strand/test/grouptest"
)

// VenvEnv names the virtualenv with confluent-kafka.
const VenvEnv = "STRAND_PY_VENV"

var found struct {
	once   sync.Once
	python string
	err    string
}

// Python is the virtualenv's python with confluent-kafka, or the test
// skips (fails under CI) saying how to install it.
func Python(t testing.TB) string {
	t.Helper()
	found.once.Do(func() {
		venv := os.Getenv(VenvEnv)
		if venv == "" {
			cache := os.Getenv("XDG_CACHE_HOME")
			if cache == "" {
				home, err := os.UserHomeDir()
				if err != nil {
					found.err = "no home directory for the confluent-kafka virtualenv: " + err.Error()
					return
				}
				cache = filepath.Join(home, ".cache")
			}
			venv = filepath.Join(cache, "strand-py")
		}
		python := filepath.Join(venv, "bin", "python")
		install := fmt.Sprintf("python3 -m venv %s && %s/bin/pip install confluent-kafka==2.16.1, as .ci/run does", venv, venv)
		if _, err := os.Stat(python); err != nil {
			found.err = fmt.Sprintf("%s not found (install: %s)", python, install)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if out, err := exec.CommandContext(ctx, python, "-c", "import confluent_kafka").CombinedOutput(); err != nil {
			found.err = fmt.Sprintf("confluent-kafka not importable by %s (install: %s): %v %s", python, install, err,
				strings.TrimSpace(string(out)))
			return
		}
		found.python = python
	})
	if found.err != "" {
		testutil.Missing(t, found.err)
	}
	return found.python
}

// ScriptsDir is test/python, found from this file so that a test package
// anywhere in the module can run its scripts.
func ScriptsDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "python")
}

// GroupMember runs group_librdkafka.py against addr: a librdkafka consumer
// in group, with name as its client.id, of the group protocol given
// (classic or consumer).
func GroupMember(t testing.TB, addr, topic, group, name, protocol string) *grouptest.ProcMember {
	t.Helper()
	return grouptest.StartProcMember(t, name, ScriptsDir(), nil, Python(t), "group_librdkafka.py", "--bootstrap", addr,
		"--topic", topic, "--group", group, "--client-id", name, "--protocol", protocol, "--deadline-s", "240")
}
