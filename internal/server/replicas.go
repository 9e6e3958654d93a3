package server

import (
	"github.com/strandlog/strand/internal/model"
	"github.com/strandlog/strand/internal/protocol"
	"github.com/strandlog/strand/internal/replica"
)

// protocolReplicas is the replica manager as handlers see it
// (protocol.Replicas): partitions they can read from and append to, but
// whose logs they cannot reach.
type protocolReplicas struct{ m *replica.Manager }

func (r protocolReplicas) Get(tp model.TopicPartition) (protocol.Partition, bool) {
	p, ok := r.m.Get(tp)
	if !ok {
		return nil, false // not a typed nil in the interface
	}
	return p, true
}

func (r protocolReplicas) Partitions() []protocol.Partition {
	ps := r.m.Partitions()
	out := make([]protocol.Partition, len(ps))
	for i, p := range ps {
		out[i] = p
	}
	return out
}

// SyncAppends takes back the partitions Get handed out.
func (r protocolReplicas) SyncAppends(ps []protocol.Partition, ends []int64) []error {
	rps := make([]*replica.Partition, len(ps))
	for i, p := range ps {
		rps[i] = p.(*replica.Partition)
	}
	return replica.SyncAppends(rps, ends)
}
