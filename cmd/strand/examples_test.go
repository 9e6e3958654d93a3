package main

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestEveryCommandHasExamples: --help shows examples on every command a
// user runs.
func TestEveryCommandHasExamples(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Runnable() && c.Example == "" && c.Name() != "help" && c.Parent() != nil && c.Parent().Name() != "completion" {
			t.Errorf("%s has no examples", c.CommandPath())
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(rootCommand())
	for path := range examples {
		if c, _, err := rootCommand().Find(splitPath(path)); err != nil || c.CommandPath() != path {
			t.Errorf("examples for %q, which is no command", path)
		}
	}
}

// splitPath is a command path's words after "strand".
func splitPath(path string) []string {
	var out []string
	for i, w := range strings.Fields(path) {
		if i > 0 {
			out = append(out, w)
		}
	}
	return out
}

// TestExamplesParse: every example of every command names a command and
// flags it has.
func TestExamplesParse(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, line := range strings.Split(c.Example, "\n") {
			line = strings.TrimSpace(line)
			if !strings.HasPrefix(line, "strand ") {
				continue // a line given to another program
			}
			for _, cut := range []string{" #", " |", " ||", " <", " >"} {
				if i := strings.Index(line, cut); i >= 0 {
					line = line[:i]
				}
			}
			args := shellWords(line)[1:]
			root := rootCommand()
			cmd, rest, err := root.Find(args)
			if err != nil {
				t.Errorf("%s: example %q: %v", c.CommandPath(), line, err)
				continue
			}
			if err := cmd.ParseFlags(rest); err != nil {
				t.Errorf("%s: example %q: %v", c.CommandPath(), line, err)
			}
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(rootCommand())
}

// shellWords splits a command line at spaces, keeping single-quoted words
// whole.
func shellWords(s string) []string {
	var out []string
	var w strings.Builder
	quoted, in := false, false
	for _, r := range s {
		switch {
		case r == '\'':
			quoted, in = !quoted, true
		case r == ' ' && !quoted:
			if in {
				out = append(out, w.String())
				w.Reset()
			}
			in = false
		default:
			w.WriteRune(r)
			in = true
		}
	}
	if in {
		out = append(out, w.String())
	}
	return out
}
