package group

import (
	"github.com/strandlog/strand/internal/model"
)

// OtherRecords is a coordinator that keeps its groups in
// __consumer_offsets beside the group coordinator's (the share groups',
// KIP-932): their partitions load and unload together, so its groups
// follow the partition's leadership as the classic and consumer groups
// do.
type OtherRecords interface {
	// Owns reports whether records of a key type are the other
	// coordinator's.
	Owns(keyType int16) bool
	// Loaded gives over the records of partition i (of n) it owns, in
	// log order, a tombstone's value nil, once this broker coordinates
	// the partition.
	Loaded(i, n int32, recs []model.KeyValue)
	// Unloaded: this broker no longer coordinates partition i.
	Unloaded(i, n int32)
}

// WriteOther appends another coordinator's records for groupID to the
// group's __consumer_offsets partition, and returns once they are durable
// on its in-sync replicas: NOT_COORDINATOR when this broker does not
// coordinate the group.
func (c *Coordinator) WriteOther(groupID string, recs []model.KeyValue) error {
	w, err := c.writerFor(groupID)
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	if err := w.write(recs, c.clock.Now().UnixMilli(), func(_ int64, err error) { done <- err }); err != nil {
		return err
	}
	return <-done
}
