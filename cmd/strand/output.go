package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"
)

// formatFlag gives cmd the --format flag of the tools that print data: a
// table for people, JSON or YAML for scripts.
func formatFlag(cmd *cobra.Command, format *string) {
	cmd.Flags().StringVar(format, "format", "table", "table, json or yaml")
}

// checkFormat accepts the output formats of the tools.
func checkFormat(format string) error {
	switch format {
	case "table", "json", "yaml":
		return nil
	}
	return fmt.Errorf("--format %q: table, json or yaml", format)
}

// writeData writes v as JSON, or as YAML with the JSON's field names in
// the same order.
func writeData(w io.Writer, format string, v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return err
	}
	if format != "yaml" {
		_, err := w.Write(buf.Bytes())
		return err
	}
	// JSON is YAML: read it as a document, then write it in block style.
	var doc yaml.Node
	if err := yaml.Unmarshal(buf.Bytes(), &doc); err != nil {
		return err
	}
	blockStyle(&doc)
	ye := yaml.NewEncoder(w)
	ye.SetIndent(2)
	if err := ye.Encode(&doc); err != nil {
		return err
	}
	return ye.Close()
}

// blockStyle drops the JSON's flow style and quotes; the encoder quotes
// what YAML 1.2 would read back as something else, and the words YAML 1.1
// readers take for booleans stay quoted.
func blockStyle(n *yaml.Node) {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!str" || !yaml11Bools[strings.ToLower(n.Value)] {
		n.Style = 0
	}
	for _, c := range n.Content {
		blockStyle(c)
	}
}

var yaml11Bools = map[string]bool{"y": true, "n": true, "yes": true, "no": true, "on": true, "off": true}

// terminalWidth is the width tables are narrowed to.
const terminalWidth = 120

// fitTable holds rows of cells printed in columns two spaces apart,
// narrowed to a width by cutting the cells of the columns that may be cut
// (names and labels: never a figure).
type fitTable struct {
	rows [][]string
	cut  map[int]bool
}

func newFitTable(cuttable ...int) *fitTable {
	t := &fitTable{cut: map[int]bool{}}
	for _, c := range cuttable {
		t.cut[c] = true
	}
	return t
}

func (t *fitTable) add(cells ...string) { t.rows = append(t.rows, cells) }

// write prints the rows within width, cutting the widest cuttable
// column first, none below 8 runes. A cell is cut in its middle ("…"),
// keeping both ends: names differ at their ends as often as at their
// starts (orders-processor-1, orders-processor-2).
func (t *fitTable) write(w io.Writer, width int) {
	var widths []int
	for _, r := range t.rows {
		for i, c := range r {
			if i == len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	total := func() int {
		n := 2 * (len(widths) - 1)
		for _, w := range widths {
			n += w
		}
		return n
	}
	for total() > width {
		widest := -1
		for i, w := range widths {
			if t.cut[i] && w > 8 && (widest < 0 || w > widths[widest]) {
				widest = i
			}
		}
		if widest < 0 {
			break
		}
		widths[widest]--
	}
	var b strings.Builder
	for _, r := range t.rows {
		b.Reset()
		for i, c := range r {
			if n := utf8.RuneCountInString(c); n > widths[i] {
				r, head := []rune(c), (widths[i]-1)/2
				c = string(r[:head]) + "…" + string(r[n-(widths[i]-1-head):])
			}
			b.WriteString(c)
			if i < len(r)-1 {
				b.WriteString(strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c)+2))
			}
		}
		fmt.Fprintln(w, b.String())
	}
}
