package cluster

import (
	"encoding/json"
	"fmt"
	"path/filepath"

	"github.com/strandlog/strand/internal/cluster/raft"
	"github.com/strandlog/strand/internal/log/vfs"
)

// A backup of a cluster's metadata is the image a voter's metadata log
// held: its snapshot and the committed changes after it, applied. It is
// taken from a copy of a voter's data directory (every voter holds the
// whole metadata), and restored by seeding the metadata log of each voter
// of a new quorum with it (raft.Seed), when every voter's log is lost.
// What the partitions hold is not in it: it lives in each broker's data
// directory, under the topic ids the image keeps.

// BackupFormat names the file a backup is written to.
const BackupFormat = "strand-metadata-backup"

// Backup is the metadata of a cluster at one index of its log.
type Backup struct {
	Format    string          `json:"format"`
	Version   int             `json:"version"`
	ClusterID string          `json:"cluster_id"`
	Index     uint64          `json:"index"`
	Image     json.RawMessage `json:"image"`
}

// ReadBackup reads the metadata held in dataDir's metadata log. Reading
// recovers the log as a broker's start would (a torn tail is cut), so
// give it a copy of a voter's data directory, or the directory of a
// stopped one.
func ReadBackup(dataDir string) (Backup, error) {
	s := newStore(-1)
	index, err := raft.Replay(vfs.OS, filepath.Join(dataDir, MetadataDir), stateMachine{s})
	if err != nil {
		return Backup{}, fmt.Errorf("reading the metadata log in %s: %w", dataDir, err)
	}
	image, err := s.snapshot()
	if err != nil {
		return Backup{}, err
	}
	return Backup{Format: BackupFormat, Version: 1, ClusterID: s.ClusterID(), Index: index, Image: image}, nil
}

// Restore seeds dataDir's metadata log, which must not exist yet, with
// the backup's image, for a quorum of voters (node id to its controller
// listener's address). Each voter of the new quorum is seeded with the
// same backup and voters.
func (b Backup) Restore(dataDir string, voters map[int32]string) error {
	if b.Format != BackupFormat || b.Version != 1 || b.Index == 0 {
		return fmt.Errorf("not a metadata backup of this version (format %q, version %d, index %d)", b.Format, b.Version, b.Index)
	}
	var im image
	if err := json.Unmarshal(b.Image, &im); err != nil {
		return fmt.Errorf("the backup's image: %w", err)
	}
	members := make(map[uint64]string, len(voters))
	for id, addr := range voters {
		members[raftID(id)] = addr
	}
	return raft.Seed(vfs.OS, filepath.Join(dataDir, MetadataDir), b.Index, members, b.Image)
}
