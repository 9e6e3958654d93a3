package testutil

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// README is the repository's README.md, whose commands tests run as
// written.
func README(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(moduleRoot(), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// SectionBlock is the first fenced sh block after the heading.
func SectionBlock(t testing.TB, doc, heading string) string {
	t.Helper()
	_, section, ok := strings.Cut(doc, "\n"+heading+"\n")
	if !ok {
		t.Fatalf("README.md has no %q section", heading)
	}
	_, block, ok := strings.Cut(section, "```sh\n")
	if !ok {
		t.Fatalf("the %q section has no sh block", heading)
	}
	block, _, _ = strings.Cut(block, "```")
	return block
}

// Section is a Markdown document's text under one heading (of any level),
// up to the next heading; the text before the first heading has heading "".
type Section struct {
	Heading string
	Blocks  []string // its fenced sh blocks
	Spans   []string // its inline code spans, outside blocks, each on one line
}

var codeSpan = regexp.MustCompile("`([^`]+)`")

// Sections splits a Markdown document at its headings, in order.
func Sections(doc string) []Section {
	out := []Section{{}}
	var prose, block strings.Builder
	inBlock, isSh := false, false
	endProse := func() {
		s := &out[len(out)-1]
		for _, m := range codeSpan.FindAllStringSubmatch(prose.String(), -1) {
			s.Spans = append(s.Spans, strings.Join(strings.Fields(m[1]), " "))
		}
		prose.Reset()
	}
	for _, line := range strings.SplitAfter(doc, "\n") {
		switch {
		case inBlock && strings.HasPrefix(line, "```"):
			if isSh {
				out[len(out)-1].Blocks = append(out[len(out)-1].Blocks, block.String())
			}
			block.Reset()
			inBlock = false
		case inBlock:
			block.WriteString(line)
		case strings.HasPrefix(line, "```"):
			endProse()
			inBlock, isSh = true, strings.TrimSpace(strings.TrimPrefix(line, "```")) == "sh"
		case strings.HasPrefix(line, "#"):
			endProse()
			out = append(out, Section{Heading: strings.TrimSpace(line)})
		default:
			prose.WriteString(line)
		}
	}
	endProse()
	return out
}

// CommandLines are a sh block's commands: continued lines joined, blank
// lines and comment lines left out (comments after a command stay).
func CommandLines(block string) []string {
	var out []string
	for _, line := range strings.Split(strings.ReplaceAll(block, "\\\n", " "), "\n") {
		line = strings.TrimSpace(line)
		if line != "" && !strings.HasPrefix(line, "#") {
			out = append(out, line)
		}
	}
	return out
}
