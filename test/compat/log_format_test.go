package compat

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/strandlog/strand/internal/testutil"
)

// TestLogFormatJSON: with --log-format json every line the broker writes
// is one JSON object with a time, a level and a message, the lines of a
// request it logs included.
func TestLogFormatJSON(t *testing.T) {
	t.Parallel()
	b := startBroker(t, "--log-format", "json")
	ctx := groupCtx(t, 30*time.Second)
	// Creating a topic logs a line of its own.
	if _, err := kadm.NewClient(client(t, b.Addr)).CreateTopic(ctx, 1, 1, nil, "logged"); err != nil {
		t.Fatal(err)
	}
	var lines []string
	testutil.EventuallyEvery(t, 10*time.Second, 50*time.Millisecond, func() error {
		out := b.Output.String()
		if !strings.Contains(out, `"msg":"created topic"`) {
			return fmt.Errorf("no created topic line in:\n%s", out)
		}
		lines = strings.Split(strings.TrimSpace(out), "\n")
		return nil
	})
	for _, l := range lines {
		var rec struct {
			Time  time.Time `json:"time"`
			Level string    `json:"level"`
			Msg   string    `json:"msg"`
		}
		if err := json.Unmarshal([]byte(l), &rec); err != nil || rec.Time.IsZero() || rec.Level == "" || rec.Msg == "" {
			t.Fatalf("not a JSON log line (%v): %s", err, l)
		}
	}
	r := run(time.Minute, "", "", testutil.Binary(t), "serve", "--log-format", "xml")
	if r.err == nil || !strings.Contains(r.stderr, "text or json") {
		t.Fatalf("serve --log-format xml: %v", r)
	}
}
