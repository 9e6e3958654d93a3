package main

import (
	"testing"
	"time"
)

func TestParseFrom(t *testing.T) {
	now := time.UnixMilli(1_000_000)
	for in, want := range map[string]startSpec{
		"beginning": {kind: "beginning"}, "start": {kind: "beginning"}, "end": {kind: "end"},
		"42": {kind: "offset", n: 42}, "+5": {kind: "after-start", n: 5}, "-5": {kind: "before-end", n: 5},
		"@1700": {kind: "time", n: 1700}, "@-10s": {kind: "time", n: 990_000},
		"@1970-01-01T00:00:02Z": {kind: "time", n: 2000},
	} {
		got, err := parseFrom(in, now)
		if err != nil || got != want {
			t.Errorf("%q: %+v %v, want %+v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "first", "@soon", "@10s", "1.5"} {
		if _, err := parseFrom(bad, now); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
	// Offsets stay within the partition.
	for s, want := range map[startSpec]int64{{kind: "offset", n: 3}: 10, {kind: "offset", n: 99}: 20,
		{kind: "before-end", n: 50}: 10, {kind: "after-start", n: 4}: 14, {kind: "end"}: 20} {
		if got := s.within(10, 20, nil, "t", 0); got != want {
			t.Errorf("%+v in [10, 20]: %d, want %d", s, got, want)
		}
	}
}
