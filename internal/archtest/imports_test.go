package archtest

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/strandlog/strand"

// TestImportRules checks the import directions the design fixes: leaf types
// stay leaves, the log never learns the wire protocol, handlers never reach
// past the replica layer to the log, and only the binary (and test helpers)
// wire the server, and only the admin listener knows Prometheus.
func TestImportRules(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}}:{{join .Imports \" \"}}", module+"/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	imports := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, deps, _ := strings.Cut(line, ":")
		imports[strings.TrimPrefix(pkg, module+"/")] = strings.Fields(deps)
	}
	if len(imports) < 5 {
		t.Fatalf("go list found only %d packages", len(imports))
	}
	rules := []struct {
		pkg    string
		forbid func(dep string) bool
		why    string
	}{
		{"internal/model", func(d string) bool { return strings.Contains(d, ".") }, "model imports only the standard library"},
		{"internal/lockrank", func(d string) bool { return strings.Contains(d, ".") }, "the ranked locks import only the standard library"},
		{"internal/log", func(d string) bool { return strings.Contains(d, "franz-go") }, "the log never imports kmsg"},
		{"internal/log", func(d string) bool {
			return strings.HasPrefix(d, module) && d != module+"/internal/model" && d != module+"/internal/log/vfs"
		}, "the log imports only model and its vfs"},
		{"internal/protocol", func(d string) bool { return d == module+"/internal/log" }, "protocol reaches the log only through replica"},
		{"internal/replica", func(d string) bool {
			return strings.HasPrefix(d, module) && !strings.HasPrefix(d, module+"/internal/log") && d != module+"/internal/model"
		}, "replica imports only the log and model"},
		{"internal/cluster", func(d string) bool {
			return strings.HasPrefix(d, module) && d != module+"/internal/model" && d != module+"/internal/cluster/raft" &&
				d != module+"/internal/log/vfs"
		}, "cluster imports only model, its Raft glue and the vfs that glue stores through"},
		{"internal/cluster/raft", func(d string) bool {
			return strings.HasPrefix(d, module) && d != module+"/internal/log/vfs"
		}, "the Raft glue imports only the vfs it stores through"},
		{"internal/group", func(d string) bool {
			return strings.HasPrefix(d, module) && d != module+"/internal/model" && d != module+"/internal/group/assign" &&
				d != module+"/internal/coordinator"
		}, "group reaches its partitions through the coordinator runtime's interfaces: it imports only model, the runtime and its assignors"},
		{"internal/coordinator", func(d string) bool {
			return strings.HasPrefix(d, module) && d != module+"/internal/model"
		}, "the coordinator runtime is interfaces the server implements: it imports only model"},
		{"internal/group/assign", func(d string) bool { return strings.HasPrefix(d, module) }, "the assignors are pure functions of their spec"},
		{"internal/share", func(d string) bool {
			return strings.HasPrefix(d, module) && d != module+"/internal/model" && d != module+"/internal/coordinator"
		}, "share groups reach their partitions and state through the coordinator runtime's interfaces: share imports only model and the runtime"},
		{"internal/config", func(d string) bool { return strings.HasPrefix(d, "github.com/spf13/") },
			"config knows the settings, not the command line: their flags are cmd/strand's"},
		{"internal/ledger", func(d string) bool {
			return strings.HasPrefix(d, module) && d != module+"/internal/model" && d != module+"/internal/coordinator"
		}, "the ledger writes through the coordinator runtime's interfaces: it imports only model and the runtime"},
		{"internal/txn", func(d string) bool {
			return strings.HasPrefix(d, module) && d != module+"/internal/model" && d != module+"/internal/coordinator"
		}, "txn reaches its partitions and markers through the interfaces it and the coordinator runtime declare: it imports only model and the runtime"},
	}
	for _, r := range rules {
		deps, ok := imports[r.pkg]
		if !ok {
			t.Errorf("package %s not found", r.pkg)
			continue
		}
		for _, d := range deps {
			// The ranked locks are as the standard library's: any
			// package may use them.
			if d == module+"/internal/lockrank" {
				continue
			}
			if r.forbid(d) {
				t.Errorf("%s imports %s: %s", r.pkg, d, r.why)
			}
		}
	}
	for pkg, deps := range imports {
		for _, d := range deps {
			if d == module+"/internal/server" && pkg != "cmd/strand" && pkg != "internal/testutil" {
				t.Errorf("%s imports the server: only cmd/strand (and testutil) may", pkg)
			}
			if strings.HasPrefix(d, "go.etcd.io/raft") && pkg != "internal/cluster/raft" {
				t.Errorf("%s imports the Raft library: only internal/cluster/raft may", pkg)
			}
			if strings.HasPrefix(d, "github.com/prometheus/") && pkg != "internal/admin" && !strings.HasPrefix(pkg, "test/") {
				t.Errorf("%s imports %s: only internal/admin (and the test suites' helpers) import Prometheus", pkg, d)
			}
		}
	}
}
