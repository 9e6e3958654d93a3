package console

import (
	"fmt"
	"html"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// The pages are written as Go code rather than html/template: executing
// templates makes the linker keep every exported method of every type in
// the binary (7 MB of Strand's), through reflection.

// doc is a page being written.
type doc struct{ strings.Builder }

// markup is HTML that is written as it is.
type markup string

// h writes format, markup itself, with its arguments escaped: strings and
// Stringers as HTML text, markup as it is, the rest as fmt prints them.
func (d *doc) h(format string, args ...any) {
	for i, a := range args {
		switch v := a.(type) {
		case markup:
			args[i] = string(v)
		case string:
			args[i] = html.EscapeString(v)
		case fmt.Stringer:
			args[i] = html.EscapeString(v.String())
		}
	}
	fmt.Fprintf(&d.Builder, format, args...)
}

func escape(s string) string { return html.EscapeString(s) }

// link is an href to a path whose segments are escaped.
func link(segments ...string) string {
	for i, s := range segments {
		segments[i] = url.PathEscape(s)
	}
	return "/" + strings.Join(segments, "/")
}

// when sets an attribute (or a class) only if cond holds.
func when(cond bool, m markup) markup {
	if cond {
		return m
	}
	return ""
}

// orDash is s, or a dash for nothing.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// offsetLabel is an offset or lag, "-" when unknown (-1).
func offsetLabel(n int64) string {
	if n < 0 {
		return "-"
	}
	return fmt.Sprint(n)
}

// defaultRefresh is how often, in seconds, the pages that show live
// figures reload themselves while open; ?refresh=N changes it, 0 stops it.
const defaultRefresh = 10

// refreshOf reads a page's ?refresh, within an hour.
func refreshOf(q url.Values) int {
	n, err := strconv.Atoi(q.Get("refresh"))
	if err != nil || n < 0 {
		return defaultRefresh
	}
	return min(n, 3600)
}

// write sends a page: the layout around body.
func (c *Console) write(w http.ResponseWriter, title, section string, body func(d *doc)) {
	c.writeLive(w, title, section, 0, body)
}

// writeLive sends a page that reloads itself every refresh seconds (none
// for 0), so that its figures stay current while it is open.
func (c *Console) writeLive(w http.ResponseWriter, title, section string, refresh int, body func(d *doc)) {
	var d doc
	d.h(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
%s<title>%s · Strand</title>`, when(refresh > 0, markup(fmt.Sprintf(`<meta http-equiv="refresh" content="%d" id="refresh">`+"\n", refresh))), title)
	d.h(`
<link rel="stylesheet" href="/static/style.css">
</head>
<body>
<header>
  <span class="brand">STRAND</span>
  <nav>`)
	sections := [][2]string{{"overview", "/"}, {"topics", "/topics"}, {"groups", "/groups"}}
	if c.cfg.Links != nil {
		sections = append(sections, [2]string{"links", "/links"})
	}
	for _, s := range sections {
		d.h(`<a href="%s"%s>%s</a>`, s[1], when(s[0] == section, ` class="on"`), strings.ToUpper(s[0][:1])+s[0][1:])
	}
	mode := "read-only"
	if c.cfg.Actions {
		mode = "actions on"
	}
	d.h("</nav>\n  <span class=\"muted\">%s</span>\n</header>\n<main>\n", mode)
	body(&d)
	d.h("</main>\n</body>\n</html>\n")
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; style-src 'self'; img-src 'self' data:")
	if _, err := w.Write([]byte(d.String())); err != nil {
		c.cfg.Logger.Debug("console: writing a page", "err", err)
	}
}

// fail shows an error page with the status.
func (c *Console) fail(w http.ResponseWriter, status int, err error) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	c.write(w, "Error", "", func(d *doc) { d.h(`<h1>Error</h1><p class="bad" id="error">%s</p>`, err.Error()) })
}

// card is one figure of a page's header row.
func (d *doc) card(label, id, class string, value any) {
	d.h(`<div class="card"><div class="k">%s</div><div class="v %s"%s>%v</div></div>`, label, class,
		when(id != "", markup(` id="`+html.EscapeString(id)+`"`)), value)
}
