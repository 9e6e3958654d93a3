package log

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/strandlog/strand/internal/log/vfs"
	"github.com/strandlog/strand/internal/model"
)

// A follower's log copies its leader's byte for byte: same offsets (gaps
// included), same leader epochs, same bytes; a batch that does not fit is
// refused whole.
func TestAppendReplicatedCopiesTheLeader(t *testing.T) {
	fileSystems(t, func(t *testing.T, fsys vfs.FS, dir string) {
		leader := openLog(t, fsys, dir+"/leader", testConfig(), nil)
		defer leader.Close()
		for i, epoch := range []int32{0, 0, 2, 2, 5} {
			if _, err := leader.Append(makeBatch(t, fmt.Sprint(i), 7, 0, 0), AppendOptions{LeaderEpoch: epoch}); err != nil {
				t.Fatal(err)
			}
		}
		follower := openLog(t, fsys, dir+"/follower", testConfig(), nil)
		defer follower.Close()
		for next := int64(0); next < leader.EndOffset(); {
			sec, err := leader.Read(next, 300, leader.EndOffset())
			if err != nil {
				t.Fatal(err)
			}
			data, err := sec.ReadAll()
			if err != nil {
				t.Fatal(err)
			}
			// A fetch may end inside a batch: only whole ones are written.
			data = WholeBatches(append(data, data[:20]...))
			res, err := follower.AppendReplicated(data)
			if err != nil {
				t.Fatal(err)
			}
			next = res.LastOffset + 1
		}
		if follower.EndOffset() != leader.EndOffset() || fmt.Sprint(follower.Epochs()) != fmt.Sprint(leader.Epochs()) {
			t.Fatalf("follower ends at %d with epochs %v; leader %d, %v", follower.EndOffset(), follower.Epochs(),
				leader.EndOffset(), leader.Epochs())
		}
		whole := func(l *Log) []byte {
			var out []byte
			for next := int64(0); next < l.EndOffset(); {
				sec, _ := l.Read(next, 1<<20, l.EndOffset())
				data, err := sec.ReadAll()
				if err != nil || len(data) == 0 {
					t.Fatalf("read at %d: %v", next, err)
				}
				out = append(out, data...)
				for len(data) > 0 {
					b := model.Batch(data)
					next = b.LastOffset() + 1
					data = data[b.Size():]
				}
			}
			return out
		}
		if !bytes.Equal(whole(follower), whole(leader)) {
			t.Fatal("the follower's bytes differ from the leader's")
		}
		// Below the log end, out of order, or damaged: refused, nothing written.
		end := follower.EndOffset()
		old := makeBatch(t, "old", 2, 0, 0)
		model.Batch(old).SetBaseOffset(end - 1)
		gap := makeBatch(t, "gap", 2, 0, 0)
		model.Batch(gap).SetBaseOffset(end + 10)
		damaged := bytes.Clone(gap)
		damaged[len(damaged)-1] ^= 1
		for name, data := range map[string][]byte{"below the end": old, "damaged": damaged} {
			if _, err := follower.AppendReplicated(data); err == nil {
				t.Errorf("%s: appended", name)
			}
		}
		if _, err := follower.AppendReplicated(append(bytes.Clone(gap), old...)); !errors.Is(err, ErrInvalidRecord) {
			t.Errorf("out of order: %v", err)
		}
		if follower.EndOffset() != end {
			t.Fatalf("a refused append moved the end to %d", follower.EndOffset())
		}
		// A gap (compaction on the leader) is kept.
		if res, err := follower.AppendReplicated(gap); err != nil || res.BaseOffset != end+10 || follower.EndOffset() != end+12 {
			t.Fatalf("after a gap: %+v, %v, end %d", res, err, follower.EndOffset())
		}
	})
}

// New leader epochs are kept in memory on the append path and written with
// the checkpoint; after a crash that lost the epoch file's update, the
// epochs of the durable batches are found in the batches again.
func TestEpochsSurviveACrash(t *testing.T) {
	mem := vfs.NewMem()
	l := openLog(t, mem, "/p", testConfig(), nil)
	for i, epoch := range []int32{0, 0, 2, 5} {
		if _, err := l.Append(makeBatch(t, fmt.Sprint(i), 3, 0, 0), AppendOptions{LeaderEpoch: epoch, Durable: true}); err != nil {
			t.Fatal(err)
		}
	}
	if b, err := vfs.ReadFile(mem, "/p/"+epochFile); err == nil && bytes.Contains(b, []byte("5 9")) {
		t.Fatal("the append path wrote the epoch file")
	}
	want := fmt.Sprint(l.Epochs())
	crashed := mem.CrashClone(vfs.CrashOptions{})
	l.Close()
	again := openLog(t, crashed, "/p", testConfig(), nil)
	defer again.Close()
	if got := fmt.Sprint(again.Epochs()); got != want {
		t.Fatalf("epochs after a crash %s, want %s", got, want)
	}
	// A checkpoint writes them, so a later crash finds them in the file.
	if err := again.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if b, err := vfs.ReadFile(crashed, "/p/"+epochFile); err != nil || !bytes.Contains(b, []byte("5 9")) {
		t.Fatalf("epoch file after a checkpoint: %q, %v", b, err)
	}
}
