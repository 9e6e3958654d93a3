package main

import (
	"slices"
	"strings"
	"testing"
)

// TestUnknownFlagSuggests: every command answers a mistyped flag with its
// own flags closest to it, and one with nothing close with where they are
// listed.
func TestUnknownFlagSuggests(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"topic", "list", "--brokrs", "x"}, "unknown flag: --brokrs; did you mean --brokers?"},
		{[]string{"group", "describe", "--grup", "g"}, "unknown flag: --grup; did you mean --group?"},
		{[]string{"consume", "orders", "--exit-at-nd"}, "unknown flag: --exit-at-nd; did you mean --exit-at-end?"},
		{[]string{"serve", "--retension-ms", "5"}, "unknown flag: --retension-ms; did you mean --retention-ms?"},
		{[]string{"migrate", "plan", "--group", "g", "--profle", "p"}, "did you mean --profile?"}, // a root's persistent flag
		{[]string{"topic", "create", "t", "--zzzzzz"}, "unknown flag: --zzzzzz (strand topic create --help lists its flags)"},
	} {
		_, err := strandRun(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("strand %s: %v, want %q", strings.Join(tc.args, " "), err, tc.want)
		}
	}
}

func TestClosest(t *testing.T) {
	groups := []string{"orders-processor", "orders-processor-v2", "payments-processor", "audit"}
	for _, tc := range []struct {
		name       string
		candidates []string
		want       []string
	}{
		{"orders-procesor", groups, []string{"orders-processor"}},
		{"Orders_Processor", groups, []string{"orders-processor"}},
		{"orders-processor-v3", groups, []string{"orders-processor-v2", "orders-processor"}},
		{"audti", groups, []string{"audit"}},
		{"inventory", groups, nil},
		{"log.retention.msx", []string{"log.retention.ms", "log.retention.bytes", "log.segment.bytes"}, []string{"log.retention.ms"}},
		{"num.partition", []string{"num.partitions", "num.io.threads"}, []string{"num.partitions"}},
		{"retention_ms", []string{"retention-ms", "retention-bytes"}, []string{"retention-ms"}},
	} {
		if got := closest(tc.name, tc.candidates); !slices.Equal(got, tc.want) {
			t.Errorf("closest(%q) = %q, want %q", tc.name, got, tc.want)
		}
	}
	if got := didYouMean("--%s", []string{"a", "b", "c"}); got != "; did you mean --a, --b or --c?" {
		t.Errorf("didYouMean: %q", got)
	}
}
