package console

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/strandlog/strand/internal/inspect"
)

// Chart is a lag chart as the page draws it: an SVG polyline per series
// in a box of Width by Height.
type Chart struct {
	Width, Height int
	Series        []Series
	Marks         []Mark        // those within the chart's span, placed
	Max           int64         // the highest lag shown
	Span          time.Duration // from the first sample to the last
	Points        int
}

// Series is one line of a chart.
type Series struct {
	Name   string
	Points string // x,y pairs for polyline
	Class  string
	Last   int64
}

// Mark is a moment the chart marks with a vertical line: a rebalance.
type Mark struct {
	At    time.Time
	Label string
	X     float64
}

// maxSeries bounds the partitions drawn beside the total.
const maxSeries = 8

// lagChart draws the total lag and the lag of the partitions that lagged
// most (up to maxSeries), or, with byVersion, the lag of each version's
// partitions (as they are owned now: a partition's past lag is drawn
// under its owner's version), with marks at the moments within its span.
func lagChart(pts []lagPoint, marks []Mark, byVersion map[inspect.Partition]string) Chart {
	c := Chart{Width: 640, Height: 160, Points: len(pts)}
	if len(pts) == 0 {
		return c
	}
	c.Span = pts[len(pts)-1].At.Sub(pts[0].At)
	for _, m := range marks {
		if d := m.At.Sub(pts[0].At); d >= 0 && d <= c.Span && c.Span > 0 {
			m.X = d.Seconds() / c.Span.Seconds() * float64(c.Width)
			c.Marks = append(c.Marks, m)
		}
	}
	for _, p := range pts {
		c.Max = max(c.Max, p.Total)
	}
	c.Series = append(c.Series, c.line("total", "total", pts, func(p lagPoint) int64 { return p.Total }))
	if byVersion != nil {
		versionOf := func(tp inspect.Partition) string { return cmp.Or(byVersion[tp], "unassigned") }
		names := map[string]bool{}
		for _, p := range pts {
			for tp := range p.Partitions {
				names[versionOf(tp)] = true
			}
		}
		for i, v := range slices.Sorted(maps.Keys(names)) {
			if i == maxSeries {
				break
			}
			c.Series = append(c.Series, c.line(v, fmt.Sprintf("p%d", i), pts, func(p lagPoint) int64 {
				var sum int64
				for tp, lag := range p.Partitions {
					if versionOf(tp) == v {
						sum += lag
					}
				}
				return sum
			}))
		}
		return c
	}
	peak := map[inspect.Partition]int64{}
	for _, p := range pts {
		for tp, lag := range p.Partitions {
			peak[tp] = max(peak[tp], lag)
		}
	}
	parts := make([]inspect.Partition, 0, len(peak))
	for tp := range peak {
		parts = append(parts, tp)
	}
	slices.SortFunc(parts, func(a, b inspect.Partition) int {
		if peak[a] != peak[b] {
			return int(peak[b] - peak[a])
		}
		return inspect.ComparePartitions(a, b)
	})
	if len(parts) > maxSeries {
		parts = parts[:maxSeries]
	}
	for i, tp := range parts {
		c.Series = append(c.Series, c.line(tp.String(), fmt.Sprintf("p%d", i), pts, func(p lagPoint) int64 { return p.Partitions[tp] }))
	}
	return c
}

// line is one series' polyline, scaled to the chart.
func (c Chart) line(name, class string, pts []lagPoint, value func(lagPoint) int64) Series {
	var b strings.Builder
	first, span := pts[0].At, c.Span.Seconds()
	for i, p := range pts {
		x := float64(c.Width) / 2
		if span > 0 {
			x = p.At.Sub(first).Seconds() / span * float64(c.Width)
		}
		y := float64(c.Height)
		if c.Max > 0 {
			y = float64(c.Height) - float64(value(p))/float64(c.Max)*float64(c.Height)
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%.1f,%.1f", x, y)
	}
	return Series{Name: name, Points: b.String(), Class: class, Last: value(pts[len(pts)-1])}
}
