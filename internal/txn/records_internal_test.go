package txn

import (
	"math"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/model"
)

func TestValueRoundTrip(t *testing.T) {
	tests := []meta{
		{state: stateEmpty, pid: 7, epoch: 3, lastEpoch: -1, prevPID: -1, nextPID: -1, timeoutMs: 60000, startMs: -1, updateMs: 1234},
		{state: stateOngoing, pid: 7, epoch: 3, lastEpoch: -1, prevPID: 5, nextPID: -1, timeoutMs: 60000, startMs: 1000, updateMs: 1234,
			parts: []model.TopicPartition{{Topic: "a", Partition: 0}, {Topic: "a", Partition: 2}, {Topic: "b", Partition: 1}}},
		{state: statePrepareCommit, pid: 7, epoch: math.MaxInt16, lastEpoch: -1, prevPID: -1, nextPID: 9, timeoutMs: 1, startMs: 1000,
			updateMs: 1234, parts: []model.TopicPartition{{Topic: "a", Partition: 0}}, clientVer: 2},
		{state: stateCompleteAbort, pid: 9, epoch: 0, lastEpoch: -1, prevPID: 7, nextPID: -1, timeoutMs: 1, startMs: 1000, updateMs: 1234, clientVer: 2},
	}
	for _, m := range tests {
		b := txnValue(&m)
		var v kmsg.TxnMetadataValue
		if err := v.ReadFrom(b); err != nil {
			t.Fatal(err)
		}
		if v.Version != 1 {
			t.Errorf("value version %d, want 1", v.Version)
		}
		if (v.Topics == nil) != (m.state == stateEmpty) {
			t.Errorf("%v: topics %v: null exactly for Empty", m.state, v.Topics)
		}
		got, err := decodeValue(b)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Errorf("round trip:\n got %+v\nwant %+v", got, m)
		}
	}
}

// A value written by Kafka 3.x (version 0, no tagged fields) loads.
func TestDecodeValueV0(t *testing.T) {
	v := kmsg.NewTxnMetadataValue()
	v.Version, v.ProducerID, v.ProducerEpoch, v.TimeoutMillis, v.State = 0, 3, 4, 5000, 1
	v.Topics = []kmsg.TxnMetadataValueTopic{{Topic: "t", Partitions: []int32{2, 1}}}
	v.LastUpdateTimestamp, v.StartTimestamp = 20, 10
	m, err := decodeValue(v.AppendTo(nil))
	if err != nil {
		t.Fatal(err)
	}
	want := meta{state: stateOngoing, pid: 3, epoch: 4, lastEpoch: -1, prevPID: -1, nextPID: -1, timeoutMs: 5000,
		startMs: 10, updateMs: 20, parts: []model.TopicPartition{{Topic: "t", Partition: 1}, {Topic: "t", Partition: 2}}}
	if !reflect.DeepEqual(m, want) {
		t.Errorf("got %+v\nwant %+v", m, want)
	}
}

func TestStateNames(t *testing.T) {
	want := []string{"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead", "PrepareEpochFence"}
	for i, w := range want {
		if got := state(i).String(); got != w {
			t.Errorf("state %d: %s, want %s", i, got, w)
		}
	}
}
