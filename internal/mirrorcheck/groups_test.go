package mirrorcheck

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// fakeOffsets answers FetchOffsets from commits in memory.
type fakeOffsets map[string]kadm.OffsetResponses

func (f fakeOffsets) FetchOffsets(_ context.Context, group string) (kadm.OffsetResponses, error) {
	return f[group], nil
}

func commits(offs ...kadm.Offset) kadm.OffsetResponses {
	r := kadm.OffsetResponses{}
	for _, o := range offs {
		if r[o.Topic] == nil {
			r[o.Topic] = map[int32]kadm.OffsetResponse{}
		}
		r[o.Topic][o.Partition] = kadm.OffsetResponse{Offset: o}
	}
	return r
}

func TestGroupOffsetDifferences(t *testing.T) {
	base := []kadm.Offset{
		{Topic: "a", Partition: 0, At: 10, LeaderEpoch: 2, Metadata: "m"},
		{Topic: "a", Partition: 1, At: 20, LeaderEpoch: 2},
		{Topic: "b", Partition: 0, At: 5, LeaderEpoch: -1},
	}
	cases := []struct {
		name   string
		mirror func(o []kadm.Offset) []kadm.Offset
		want   []string // the fields of each mismatch, in topic and partition order
		where  []int32  // the partitions of topic a (or -1 for b/0)
	}{
		{"equal", func(o []kadm.Offset) []kadm.Offset { return o }, nil, nil},
		{"offset", func(o []kadm.Offset) []kadm.Offset { o[1].At = 21; return o }, []string{"Offset"}, []int32{1}},
		{"leader epoch", func(o []kadm.Offset) []kadm.Offset { o[0].LeaderEpoch = 3; return o }, []string{"LeaderEpoch"}, []int32{0}},
		{"metadata", func(o []kadm.Offset) []kadm.Offset { o[0].Metadata = ""; return o }, []string{"Metadata"}, []int32{0}},
		{"missing", func(o []kadm.Offset) []kadm.Offset { return o[:2] }, []string{"Commit"}, []int32{-1}},
		{"extra", func(o []kadm.Offset) []kadm.Offset {
			return append(o, kadm.Offset{Topic: "a", Partition: 7, At: 1})
		}, []string{"Commit"}, []int32{7}},
		{"uncommitted on the mirror", func(o []kadm.Offset) []kadm.Offset { o[2].At = -1; return o }, []string{"Commit"}, []int32{-1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			source := fakeOffsets{"g": commits(base...), "empty": commits()}
			mirror := fakeOffsets{"g": commits(c.mirror(slices.Clone(base))...), "empty": commits()}
			rep, err := CompareOffsets(context.Background(), source, mirror, "g", "empty")
			if err != nil {
				t.Fatal(err)
			}
			if rep.Committed["g"] != 3 || rep.Committed["empty"] != 0 {
				t.Errorf("committed %v, want g 3 and empty 0", rep.Committed)
			}
			if rep.Equal() != (len(c.want) == 0) || len(rep.Mismatches) != len(c.want) {
				t.Fatalf("report: %s", rep)
			}
			for i, m := range rep.Mismatches {
				topic, p := "a", c.where[i]
				if p < 0 {
					topic, p = "b", 0
				}
				if m.Group != "g" || m.Topic != topic || m.Partition != p || m.Fields[0] != c.want[i] {
					t.Errorf("mismatch %s, want %s on %s/%d", m, c.want[i], topic, p)
				}
			}
		})
	}
}

type failingOffsets struct{}

func (failingOffsets) FetchOffsets(context.Context, string) (kadm.OffsetResponses, error) {
	return kadm.OffsetResponses{"a": {0: {Offset: kadm.Offset{Topic: "a", At: 3}, Err: kerr.UnstableOffsetCommit}}}, nil
}

func TestGroupOffsetErrorsAreErrors(t *testing.T) {
	_, err := CompareOffsets(context.Background(), fakeOffsets{"g": commits()}, failingOffsets{}, "g")
	if !errors.Is(err, kerr.UnstableOffsetCommit) {
		t.Fatalf("error %v, want the partition's", err)
	}
}
