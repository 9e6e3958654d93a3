package admin

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestGrafanaDashboard: every series the shipped Grafana dashboard
// (deploy/grafana/strand.json) queries is one this package exports, so
// that a renamed or dropped metric fails here rather than in an
// operator's empty panel. Each panel queries Prometheus through the
// dashboard's datasource variable.
func TestGrafanaDashboard(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "deploy", "grafana", "strand.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title      string `json:"title"`
			Datasource struct {
				UID string `json:"uid"`
			} `json:"datasource"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatal(err)
	}
	// The families this package declares, by the names it gives them.
	declared := map[string]bool{}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	literal := regexp.MustCompile(`"(strand_[a-z_]+)"`)
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range literal.FindAllStringSubmatch(string(src), -1) {
			declared[m[1]] = true
		}
	}
	series := regexp.MustCompile(`\bstrand_[a-z_]+`)
	used := 0
	for _, p := range dash.Panels {
		if p.Datasource.UID != "${datasource}" || len(p.Targets) == 0 {
			t.Errorf("panel %q: datasource %q, %d queries", p.Title, p.Datasource.UID, len(p.Targets))
		}
		for _, q := range p.Targets {
			for _, name := range series.FindAllString(q.Expr, -1) {
				used++
				base := name
				for _, suffix := range []string{"_bucket", "_count", "_sum"} {
					if trimmed, ok := strings.CutSuffix(name, suffix); ok && declared[trimmed] {
						base = trimmed
					}
				}
				if !declared[base] {
					t.Errorf("panel %q queries %s, which is not exported (exported: %v)", p.Title, name,
						slices.Sorted(maps.Keys(declared)))
				}
			}
		}
	}
	if used < 20 {
		t.Errorf("the dashboard queries %d series", used)
	}
}
