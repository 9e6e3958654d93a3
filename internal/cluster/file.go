package cluster

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/strandlog/strand/internal/log/vfs"
)

// fileBackend is the metadata log of a single node: no log at all, but the
// image after each record, replaced atomically and durably before the
// record's proposer is answered. One node orders its records by itself.
type fileBackend struct {
	s    *Store
	path string
}

const fileName = "cluster-metadata.json"

// OpenFile loads the metadata of the single-node cluster kept in dir, or
// starts a new cluster with a fresh id. node is this broker's id: topics
// written before partitions had placements are placed on it.
func OpenFile(dir string, node int32) (*Store, error) {
	s := newStore(node)
	be := &fileBackend{s: s, path: filepath.Join(dir, fileName)}
	s.be = be
	b, err := os.ReadFile(be.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		var id TopicID
		rand.Read(id[:])
		s.im.ClusterID = id.String()
		return s, be.save()
	case err != nil:
		return nil, err
	}
	if err := json.Unmarshal(b, &s.im); err != nil {
		return nil, fmt.Errorf("%s: %w", be.path, err)
	}
	// Files from before placements: every partition is this node's.
	for i := range s.im.Topics {
		t := &s.im.Topics[i]
		for p := int32(len(t.States)); p < t.Partitions; p++ {
			t.States = append(t.States, Partition{Replicas: []int32{node}, ISR: []int32{node}, Leader: node})
		}
	}
	s.im.index()
	return s, nil
}

func (f *fileBackend) propose(data []byte) (result, error) {
	s := f.s
	s.mu.Lock()
	defer s.mu.Unlock()
	before, err := json.Marshal(&s.im)
	if err != nil {
		return result{}, err
	}
	res := s.applyLocked(s.im.Applied+1, data)
	if err := f.save(); err != nil {
		// Undo: the change was never acknowledged.
		s.im = image{}
		_ = json.Unmarshal(before, &s.im)
		s.im.index()
		return result{}, err
	}
	return res, nil
}

func (f *fileBackend) controller() int32 { return f.s.node }

func (f *fileBackend) contact() time.Time { return time.Now() }

func (f *fileBackend) close() error { return nil }

func (f *fileBackend) stopped() <-chan struct{} { return nil }

func (f *fileBackend) failure() error { return nil }

// save writes the image atomically and durably: a change is acknowledged
// only once it would survive a crash.
func (f *fileBackend) save() error {
	b, err := json.MarshalIndent(&f.s.im, "", "  ")
	if err != nil {
		return err
	}
	return vfs.WriteFileAtomic(vfs.OS, f.path, b)
}
