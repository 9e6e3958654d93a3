package main

import (
	"bytes"
	"testing"
)

// TestWriteDataYAML: YAML keeps the JSON's names and order, in block
// style, and quotes what would read back as another type.
func TestWriteDataYAML(t *testing.T) {
	v := struct {
		Name   string            `json:"name"`
		Counts []int             `json:"counts"`
		Flag   string            `json:"flag"`
		Number string            `json:"number"`
		Empty  []string          `json:"empty"`
		Nested map[string]string `json:"nested"`
	}{"orders", []int{1, 2}, "yes", "42", []string{}, map[string]string{"k": "v"}}
	var out bytes.Buffer
	if err := writeData(&out, "yaml", v); err != nil {
		t.Fatal(err)
	}
	want := "name: orders\ncounts:\n  - 1\n  - 2\nflag: \"yes\"\nnumber: \"42\"\nempty: []\nnested:\n  k: v\n"
	if out.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", out.String(), want)
	}
	out.Reset()
	if err := writeData(&out, "json", v); err != nil || !bytes.HasPrefix(out.Bytes(), []byte("{\n  \"name\": \"orders\"")) {
		t.Fatalf("json: %q %v", out.String(), err)
	}
	if checkFormat("xml") == nil || checkFormat("yaml") != nil {
		t.Fatal("checkFormat")
	}
}
