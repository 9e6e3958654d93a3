package protocol

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/cluster"
	"github.com/strandlog/strand/internal/model"
	"github.com/strandlog/strand/internal/replica"
)

// errNotLeader: this broker does not lead the partition (Kafka
// NOT_LEADER_OR_FOLLOWER); the client refreshes its metadata and goes to
// the leader.
var errNotLeader = errors.New("this server is not the leader for that topic-partition")

// notLeaderError names the leader the metadata knows, so that answers can
// carry it (KIP-951's CurrentLeader) and clients skip a metadata round trip.
type notLeaderError struct {
	tp     model.TopicPartition
	leader int32 // cluster.NoLeader when none
	epoch  int32
}

func (e *notLeaderError) Error() string {
	return fmt.Sprintf("%v: %s is led by broker %d at epoch %d", errNotLeader, e.tp, e.leader, e.epoch)
}

func (e *notLeaderError) Unwrap() error { return errNotLeader }

// leading returns the partition when this broker leads it. A partition of
// the cluster led elsewhere (or by no one right now) is errNotLeader with
// the leader; one the cluster does not have is UNKNOWN_TOPIC_OR_PARTITION.
// Every request that reads or writes a partition's data as its leader goes
// through here, so a broker never serves as a leader it no longer is.
func (b *Broker) leading(tp model.TopicPartition) (Partition, error) {
	p, ok := b.Replicas.Get(tp)
	if ok && p.IsLeader() {
		return p, nil
	}
	st, known := b.Cluster.Partition(tp.Topic, tp.Partition)
	if !known {
		return nil, replica.ErrUnknownPartition
	}
	return nil, &notLeaderError{tp: tp, leader: st.Leader, epoch: st.LeaderEpoch}
}

// leaderHint returns the leader an error names, if it names one.
func leaderHint(err error) (leader, epoch int32, ok bool) {
	var nl *notLeaderError
	if !errors.As(err, &nl) || nl.leader == cluster.NoLeader {
		return -1, -1, false
	}
	return nl.leader, nl.epoch, true
}

// endpoints collects the listeners of the leaders answers name (KIP-951's
// NodeEndpoints), each broker once.
type endpoints map[int32]cluster.Broker

func (b *Broker) addEndpoint(eps endpoints, node int32, listener string) {
	if _, ok := eps[node]; ok {
		return
	}
	if br, ok := b.Cluster.Broker(node); ok {
		if ep, ok := br.Endpoint(listener); ok {
			br.Host, br.Port = ep.Host, ep.Port
			eps[node] = br
		}
	}
}

func (eps endpoints) produce() []kmsg.ProduceResponseBroker {
	var out []kmsg.ProduceResponseBroker
	for _, br := range eps {
		e := kmsg.NewProduceResponseBroker()
		e.NodeID, e.Host, e.Port = br.NodeID, br.Host, br.Port
		if br.Rack != "" {
			e.Rack = kmsg.StringPtr(br.Rack)
		}
		out = append(out, e)
	}
	return out
}

func (eps endpoints) fetch() []kmsg.FetchResponseBroker {
	var out []kmsg.FetchResponseBroker
	for _, br := range eps {
		e := kmsg.NewFetchResponseBroker()
		e.NodeID, e.Host, e.Port = br.NodeID, br.Host, br.Port
		if br.Rack != "" {
			e.Rack = kmsg.StringPtr(br.Rack)
		}
		out = append(out, e)
	}
	return out
}
