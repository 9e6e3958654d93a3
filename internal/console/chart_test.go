package console

import (
	"strings"
	"testing"
	"time"

	"github.com/strandlog/strand/internal/inspect"
)

// TestLagChart: the total and the partitions that lagged most are drawn,
// scaled to the box: time across, lag up from the bottom.
func TestLagChart(t *testing.T) {
	at := time.Unix(1000, 0)
	p := func(i int) inspect.Partition { return inspect.Partition{Topic: "t", Partition: int32(i)} }
	var pts []lagPoint
	for i := range 3 {
		parts := map[inspect.Partition]int64{}
		for j := range 10 {
			parts[p(j)] = int64(j * i)
		}
		pts = append(pts, lagPoint{At: at.Add(time.Duration(i) * time.Second), Total: int64(90 * i), Partitions: parts})
	}
	c := lagChart(pts, nil, nil)
	if c.Max != 180 || c.Span != 2*time.Second || len(c.Series) != 1+maxSeries {
		t.Fatalf("max %d, span %v, %d series", c.Max, c.Span, len(c.Series))
	}
	if c.Series[0].Points != "0.0,160.0 320.0,80.0 640.0,0.0" || c.Series[0].Last != 180 {
		t.Errorf("total: %q, last %d", c.Series[0].Points, c.Series[0].Last)
	}
	if c.Series[1].Name != "t-9" || c.Series[maxSeries].Name != "t-2" {
		t.Errorf("the partitions drawn: %s first, %s last", c.Series[1].Name, c.Series[maxSeries].Name)
	}
	if !strings.HasPrefix(c.Series[1].Points, "0.0,160.0 ") {
		t.Errorf("t-9: %q", c.Series[1].Points)
	}
	if empty := lagChart(nil, nil, nil); empty.Points != 0 || len(empty.Series) != 0 {
		t.Errorf("no samples: %+v", empty)
	}
}

// TestLagChartByVersion: split by version, each version's line sums its
// partitions' lag; marks within the span are placed, those outside left
// out.
func TestLagChartByVersion(t *testing.T) {
	at := time.Unix(1000, 0)
	p := func(i int) inspect.Partition { return inspect.Partition{Topic: "t", Partition: int32(i)} }
	pts := []lagPoint{
		{At: at, Total: 6, Partitions: map[inspect.Partition]int64{p(0): 1, p(1): 2, p(2): 3}},
		{At: at.Add(4 * time.Second), Total: 12, Partitions: map[inspect.Partition]int64{p(0): 2, p(1): 4, p(2): 6}},
	}
	marks := []Mark{{At: at.Add(time.Second), Label: "in"}, {At: at.Add(-time.Second), Label: "before"}, {At: at.Add(5 * time.Second), Label: "after"}}
	c := lagChart(pts, marks, map[inspect.Partition]string{p(0): "app 1.0", p(1): "app 2.0", p(2): "app 1.0"})
	names := map[string]int64{}
	for _, s := range c.Series {
		names[s.Name] = s.Last
	}
	if len(c.Series) != 3 || names["total"] != 12 || names["app 1.0"] != 8 || names["app 2.0"] != 4 {
		t.Errorf("series %v, want total 12, app 1.0 8 (partitions 0 and 2), app 2.0 4", names)
	}
	if len(c.Marks) != 1 || c.Marks[0].Label != "in" || c.Marks[0].X != 160 {
		t.Errorf("marks %+v, want one at x 160", c.Marks)
	}
	unowned := lagChart(pts, nil, map[inspect.Partition]string{p(0): "app 1.0"})
	if unowned.Series[len(unowned.Series)-1].Name != "unassigned" {
		t.Errorf("partitions nobody owns: %+v", unowned.Series)
	}
}
