package main

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// A name that is not known gets the known names closest to it: a flag, a
// config file's setting, a group id. Every tool finds them here, with one
// measure of distance.

// editDistance is the number of edits from a to b, in bytes: inserts,
// deletions, substitutions and swaps of two neighbours (the optimal string
// alignment distance), so that "audti" is one edit from "audit".
func editDistance(a, b string) int {
	// d[i][j] is the distance between a[:i] and b[:j]; three rows suffice.
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}

// maxSuggestions is how many close names a message offers at most.
const maxSuggestions = 3

// closest returns the candidates nearest to name, nearest first: those a
// few edits away (one for a short name, up to three for a long one), once
// case and the separators - _ . are set aside, and those name begins.
func closest(name string, candidates []string) []string {
	fold := func(s string) string {
		return strings.Map(func(r rune) rune {
			if r == '-' || r == '_' {
				return '.'
			}
			return r
		}, strings.ToLower(s))
	}
	n := fold(name)
	if n == "" {
		return nil
	}
	limit := min(max(1, len(n)/4), 3)
	type near struct {
		name string
		d    int
	}
	var found []near
	for _, c := range slices.Compact(slices.Sorted(slices.Values(candidates))) {
		if c == name {
			continue
		}
		f := fold(c)
		d := editDistance(n, f)
		if len(n) >= 3 && strings.HasPrefix(f, n) {
			d = min(d, limit) // a name cut short
		}
		if d <= limit {
			found = append(found, near{c, d})
		}
	}
	slices.SortStableFunc(found, func(a, b near) int { return cmp.Compare(a.d, b.d) })
	if len(found) > 0 && found[0].d == 0 {
		// The same name but for case and separators: no other is meant.
		found = slices.DeleteFunc(found, func(f near) bool { return f.d > 0 })
	}
	var out []string
	for _, f := range found[:min(len(found), maxSuggestions)] {
		out = append(out, f.name)
	}
	return out
}

// didYouMean is "; did you mean X?" (or "X or Y?") with the names given,
// each written by format ("--%s" for flags); "" for none.
func didYouMean(format string, names []string) string {
	if len(names) == 0 {
		return ""
	}
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = fmt.Sprintf(format, n)
	}
	if len(quoted) == 1 {
		return "; did you mean " + quoted[0] + "?"
	}
	return "; did you mean " + strings.Join(quoted[:len(quoted)-1], ", ") + " or " + quoted[len(quoted)-1] + "?"
}

// flagError is every command's error for flags that do not parse: an
// unknown flag gets the command's own flags closest to it.
func flagError(c *cobra.Command, err error) error {
	var unknown *pflag.NotExistError
	if !errors.As(err, &unknown) || unknown.GetSpecifiedShortnames() != "" {
		return err
	}
	var names []string
	c.Flags().VisitAll(func(f *pflag.Flag) {
		if !f.Hidden {
			names = append(names, f.Name)
		}
	})
	hint := didYouMean("--%s", closest(unknown.GetSpecifiedName(), names))
	if hint == "" {
		hint = fmt.Sprintf(" (%s --help lists its flags)", c.CommandPath())
	}
	return fmt.Errorf("%w%s", err, hint)
}
