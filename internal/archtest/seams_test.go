package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// parseDir parses the non-test files of the package in dir, by file name.
func parseDir(t *testing.T, dir string) map[string]*ast.File {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	files := map[string]*ast.File{}
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		files[name] = f
	}
	return files
}

// selectorUses returns, for each non-test file of the package in dir, the
// qualified names (pkg.Name) it uses whose package is pkg.
func selectorUses(t *testing.T, dir, pkg string) map[string][]string {
	t.Helper()
	uses := map[string][]string{}
	for name, f := range parseDir(t, dir) {
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				if id, ok := sel.X.(*ast.Ident); ok && id.Name == pkg {
					uses[name] = append(uses[name], pkg+"."+sel.Sel.Name)
				}
			}
			return true
		})
	}
	return uses
}

// TestProtocolSeesPartitionsThroughItsInterface: handlers reach a
// partition only through protocol.Partition, which has no way to its log,
// so the log's arithmetic (offsets by time, epochs, throttles) stays in
// replica. The compiler then keeps them from calling Log(); this keeps
// them from naming the concrete types that have it.
func TestProtocolSeesPartitionsThroughItsInterface(t *testing.T) {
	forbidden := map[string]bool{"replica.Partition": true, "replica.Manager": true, "replica.SyncAppends": true}
	uses := selectorUses(t, "../protocol", "replica")
	if len(uses) == 0 {
		t.Fatal("protocol uses nothing of replica: the check reads the wrong directory")
	}
	for file, names := range uses {
		for _, n := range names {
			if forbidden[n] {
				t.Errorf("protocol/%s uses %s: handlers see a partition as protocol.Partition", file, n)
			}
		}
	}
}

// TestLogConfigOnlyStores: log.Config holds how a log stores; the
// replication settings (min.insync.replicas, throttled replicas, unclean
// election) are replica.Config's, beside the log's settings it embeds.
func TestLogConfigOnlyStores(t *testing.T) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "../log/config.go", nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	var fields []string
	ast.Inspect(f, func(n ast.Node) bool {
		ts, ok := n.(*ast.TypeSpec)
		if !ok || ts.Name.Name != "Config" {
			return true
		}
		for _, fl := range ts.Type.(*ast.StructType).Fields.List {
			for _, id := range fl.Names {
				fields = append(fields, id.Name)
			}
		}
		return false
	})
	if len(fields) < 5 {
		t.Fatalf("log.Config has %d fields: the check reads the wrong file", len(fields))
	}
	for _, name := range fields {
		for _, word := range []string{"InSync", "Throttled", "Unclean", "Replica"} {
			if strings.Contains(name, word) {
				t.Errorf("log.Config.%s is a replication setting: it belongs to replica.Config", name)
			}
		}
	}
}

// declarations parses the non-test files of the package in dir and
// returns its type declarations by name, and for each method name the
// receiver types that have it.
func declarations(t *testing.T, dir string) (types map[string]ast.Expr, methods map[string][]string) {
	t.Helper()
	types, methods = map[string]ast.Expr{}, map[string][]string{}
	for _, f := range parseDir(t, dir) {
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.GenDecl:
				for _, s := range d.Specs {
					if ts, ok := s.(*ast.TypeSpec); ok {
						types[ts.Name.Name] = ts.Type
					}
				}
			case *ast.FuncDecl:
				if d.Recv == nil || len(d.Recv.List) == 0 {
					continue
				}
				recv := d.Recv.List[0].Type
				if star, ok := recv.(*ast.StarExpr); ok {
					recv = star.X
				}
				if id, ok := recv.(*ast.Ident); ok {
					methods[d.Name.Name] = append(methods[d.Name.Name], id.Name)
				}
			}
		}
	}
	return types, methods
}

// TestOneCoordinatorRuntime: the coordinators keep their state through
// the coordinator package's Topic and Partition, which the server
// implements once; none declares its own.
func TestOneCoordinatorRuntime(t *testing.T) {
	for _, pkg := range []string{"group", "txn", "ledger"} {
		types, _ := declarations(t, "../"+pkg)
		if len(types) == 0 {
			t.Fatalf("no types in %s: the check reads the wrong directory", pkg)
		}
		for _, name := range []string{"Partition", "Topic"} {
			if _, ok := types[name].(*ast.InterfaceType); ok {
				t.Errorf("%s declares its own %s interface: coordinators share coordinator.%s", pkg, name, name)
			}
		}
	}
	_, methods := declarations(t, "../server")
	if got := methods["LoadEnd"]; len(got) != 1 {
		t.Errorf("server types with LoadEnd: %v; want one adapter of coordinator.Partition", got)
	}
}

// TestOneBatchWalk: batches laid end to end in a buffer are walked with
// model.BatchReader, which says why a walk ended; a loop of its own that
// tests for a header's worth of bytes left is a walk written again. The
// log's scanHeaders walks a file, reading headers only, and is the one
// exception.
func TestOneBatchWalk(t *testing.T) {
	fset := token.NewFileSet()
	files := 0
	err := filepath.WalkDir("..", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") ||
			strings.HasPrefix(path, "../model/") {
			return err
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files++
		ast.Inspect(f, func(n ast.Node) bool {
			if fn, ok := n.(*ast.FuncDecl); ok && path == "../log/segment.go" && fn.Name.Name == "scanHeaders" {
				return false
			}
			loop, ok := n.(*ast.ForStmt)
			if !ok || loop.Cond == nil {
				return true
			}
			ast.Inspect(loop.Cond, func(c ast.Node) bool {
				if id, ok := c.(*ast.Ident); ok && (id.Name == "BatchHeaderSize" || id.Name == "BatchLengthOverhead") {
					t.Errorf("%s: a loop over batches of its own; walk them with model.BatchReader", fset.Position(loop.Pos()))
				}
				return true
			})
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("read %d files: the check reads the wrong directory", files)
	}
}

// TestAdaptersHoldWhatTheyUse: the server's adapters (what it hands the
// coordinators, the links, the admin API) hold the parts of the server
// they use, not the server: what each reaches is in its fields. Two types
// are the server's own parts, not adapters: a client connection (conn) and
// the topic admin, which reconciles as it changes topics.
func TestAdaptersHoldWhatTheyUse(t *testing.T) {
	holders := 0
	for name, f := range parseDir(t, "../server") {
		ast.Inspect(f, func(n ast.Node) bool {
			ts, ok := n.(*ast.TypeSpec)
			if !ok {
				return true
			}
			st, ok := ts.Type.(*ast.StructType)
			if !ok {
				return false
			}
			for _, fl := range st.Fields.List {
				star, ok := fl.Type.(*ast.StarExpr)
				if !ok {
					continue
				}
				if id, ok := star.X.(*ast.Ident); ok && id.Name == "Server" {
					holders++
					if ts.Name.Name != "topicAdmin" && ts.Name.Name != "conn" {
						t.Errorf("server/%s: %s holds the whole *Server; give it what it uses", name, ts.Name.Name)
					}
				}
			}
			return false
		})
	}
	if holders == 0 {
		t.Fatal("no type holds *Server, not even topicAdmin: the check reads the wrong directory")
	}
}
