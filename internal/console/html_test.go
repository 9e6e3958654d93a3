package console

import (
	"strings"
	"testing"

	"github.com/strandlog/strand/internal/inspect"
)

// TestPagesEscape: names and record contents are text on the page, never
// markup: a group id may hold anything, and so may a record.
func TestPagesEscape(t *testing.T) {
	evil := `<script>alert("x")</script>`
	var d doc
	viewGroups(&d, []groupRow{{ListedGroup: inspect.ListedGroup{Group: evil, State: "Empty"}}})
	viewRecords(&d, browseQuery{Topic: "t", Partitions: 1, As: "text", Limit: 1, Search: evil, End: 5},
		browsed{Records: []browsedRecord{{Key: evil, Value: "<img src=x onerror=alert(1)>", Headers: []browsedHeader{{evil, evil}}}}})
	out := d.String()
	if strings.Contains(out, "<script>") || strings.Contains(out, "<img") {
		t.Fatalf("markup from data on the page:\n%s", out)
	}
	if !strings.Contains(out, "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;") {
		t.Fatalf("the escaped name is missing:\n%s", out)
	}
	if !strings.Contains(out, `href="/groups/%3Cscript%3Ealert%28%22x%22%29%3C%2Fscript%3E"`) {
		t.Fatalf("the group's link is not path-escaped:\n%s", out)
	}
}
