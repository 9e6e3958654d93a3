package fetcher

import (
	"fmt"
	"testing"
	"time"

	"github.com/strandlog/strand/internal/log"
	"github.com/strandlog/strand/internal/model"
	"github.com/strandlog/strand/internal/replica"
)

// follower opens a partition whose log holds batches of 5 records at the
// given leader epochs (offsets 0-4, 5-9, ...), written as its leader.
func follower(t *testing.T, epochs ...int32) *replica.Partition {
	t.Helper()
	logs, err := log.NewManager(t.TempDir(), log.ManagerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { logs.Close() })
	cfg := replica.Defaults()
	cfg.FlushPolicy = log.FlushNever
	p, err := replica.NewManagerWith(logs, replica.Options{}).Open(model.TopicPartition{Topic: "t"}, [16]byte{1}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range epochs {
		p.SetRole(true, e)
		recs := make([]model.KeyValue, 5)
		for j := range recs {
			recs[j] = model.KeyValue{Value: fmt.Appendf(nil, "%d-%d", i, j)}
		}
		if _, _, err := p.Append(model.EncodeBatch(recs, time.Now().UnixMilli(), model.NoProducer)); err != nil {
			t.Fatal(err)
		}
	}
	p.SetRole(false, epochs[len(epochs)-1]+1)
	return p
}

// The follower cuts its log where it stops agreeing with the leader's, by
// epoch (KIP-101, KIP-279), never past its own end.
func TestTruncationPoint(t *testing.T) {
	l := &leaderLoop{}
	for _, tc := range []struct {
		name        string
		epochs      []int32 // the follower's batches
		asked       int32   // its latest epoch
		leaderEpoch int32   // the leader's answer
		leaderEnd   int64
		want        int64
	}{
		{"same epoch, the leader has more", []int32{0, 1, 1}, 1, 1, 40, 15},
		{"same epoch, the leader has less", []int32{0, 1, 1}, 1, 1, 7, 7},
		{"the leader never had the follower's epoch", []int32{0, 0, 2}, 2, 0, 8, 8},
		{"older common epoch ends past the follower's own", []int32{0, 2}, 2, 0, 12, 5},
		{"the leader knows no epoch up to the follower's", []int32{3, 3}, 3, -1, -1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := follower(t, tc.epochs...)
			if got := l.truncationPoint(p, tc.asked, tc.leaderEpoch, tc.leaderEnd); got != tc.want {
				t.Fatalf("truncate to %d, want %d (epochs %v)", got, tc.want, p.Log().Epochs())
			}
		})
	}
}
