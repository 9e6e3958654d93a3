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
	c := lagChart(pts)
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
	if empty := lagChart(nil); empty.Points != 0 || len(empty.Series) != 0 {
		t.Errorf("no samples: %+v", empty)
	}
}
