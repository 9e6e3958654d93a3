package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

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
