package protocol

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/acl"
	"github.com/strandlog/strand/internal/group"
	"github.com/strandlog/strand/internal/model"
	"github.com/strandlog/strand/internal/replica"
	"github.com/strandlog/strand/internal/txn"
)

// TxnOffsetCommit: v0-5 (Kafka 4.0's range)
//
// Behaviour:
//   - Writes the offsets into the group's __consumer_offsets partition as
//     part of the producer's transaction; they become the group's committed
//     offsets when the transaction commits (its marker), and are dropped
//     when it aborts. Until then OffsetFetch with RequireStable answers
//     UNSTABLE_OFFSET_COMMIT for them.
//   - v5+ (KIP-890) adds the group's partition to the transaction itself;
//     before v5 the client did with AddOffsetsToTxn, and the partition must
//     be in the ongoing transaction (INVALID_TXN_STATE otherwise). Either
//     is asked of the transaction's coordinator, through AddPartitionsToTxn
//     v5 when it is another broker (the group's coordinator and the
//     transaction's need not be the same).
//   - v3+: a member id and generation, when given, are checked against the
//     group (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, FENCED_INSTANCE_ID), so
//     a zombie that lost its partitions cannot commit them.
//   - A partition of a topic that does not exist is UNKNOWN_TOPIC_OR_PARTITION.
//   - PRODUCER_FENCED from v3 (INVALID_PRODUCER_EPOCH before).
//
// Authorization: WRITE on the transactional id
// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), READ on the group
// (GROUP_AUTHORIZATION_FAILED) and on each topic
// (TOPIC_AUTHORIZATION_FAILED).

func init() { register(28, 0, 5, handleTxnOffsetCommit) }

func handleTxnOffsetCommit(_ context.Context, b *Broker, r *Request) (*Response, error) {
	req := r.Body.(*kmsg.TxnOffsetCommitRequest)
	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	codes := make([][]int16, len(req.Topics))
	commit := group.TxnCommitRequest{Group: req.Group, ProducerID: req.ProducerID, ProducerEpoch: req.ProducerEpoch,
		Generation: -1}
	if req.Version >= 3 {
		commit.Generation, commit.MemberID, commit.InstanceID = req.Generation, req.MemberID, req.InstanceID
	}
	type slot struct{ t, p int }
	var slots []slot
	may := b.topicCheck(r, acl.Read)
	for i, t := range req.Topics {
		codes[i] = make([]int16, len(t.Partitions))
		_, known := b.Cluster.Topic(t.Topic)
		for j, p := range t.Partitions {
			if !may(t.Topic) {
				codes[i][j] = kerr.TopicAuthorizationFailed.Code
				continue
			}
			if !known {
				codes[i][j] = kerr.UnknownTopicOrPartition.Code
				continue
			}
			commit.Offsets = append(commit.Offsets, group.CommitOffset{Topic: t.Topic, Partition: p.Partition,
				Offset: p.Offset, LeaderEpoch: p.LeaderEpoch, Metadata: p.Metadata})
			slots = append(slots, slot{i, j})
		}
	}
	answer := func() (*Response, error) {
		for i, t := range req.Topics {
			rt := kmsg.NewTxnOffsetCommitResponseTopic()
			rt.Topic = t.Topic
			for j, p := range t.Partitions {
				rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, codes[i][j]
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return reply(resp)
	}
	failAll := func(code int16) {
		for _, s := range slots {
			codes[s.t][s.p] = code
		}
	}
	if err := checkTxnID(req.TransactionalID); err != nil {
		failAll(errorCode(err))
		return answer()
	}
	switch {
	case !b.allowed(r, acl.Write, acl.TransactionalID, req.TransactionalID):
		failAll(kerr.TransactionalIDAuthorizationFailed.Code)
		return answer()
	case !b.allowed(r, acl.Read, acl.Group, req.Group):
		failAll(kerr.GroupAuthorizationFailed.Code)
		return answer()
	}
	if len(slots) == 0 {
		return answer()
	}
	return &Response{Defer: func(ctx context.Context) (*Response, error) {
		tp, err := b.offsetsPartitionFor(req.Group)
		if err == nil {
			err = b.Txns.CheckPartitions(ctx, req.TransactionalID, req.ProducerID, req.ProducerEpoch,
				[]model.TopicPartition{tp}, req.Version >= 5)[0]
		}
		if err != nil {
			failAll(txnCode(err, req.Version, 3))
			return answer()
		}
		var errs []error
		select {
		case errs = <-b.Groups.CommitTxn(commit):
		case <-ctx.Done():
			failAll(kerr.NotCoordinator.Code)
			return answer()
		}
		for k, s := range slots {
			codes[s.t][s.p] = txnCommitCode(errs[k], req.Version)
		}
		return answer()
	}}, nil
}

// txnCommitCode maps a group coordinator error: a write refused for the
// producer's epoch says so, and any other failed write is NOT_COORDINATOR
// (the client finds the coordinator again), however the partition failed.
func txnCommitCode(err error, version int16) int16 {
	switch {
	case errors.Is(err, replica.ErrInvalidProducerEpoch):
		return txnCode(txn.ErrProducerFenced, version, 3)
	case errors.Is(err, group.ErrNotCoordinator):
		return kerr.NotCoordinator.Code
	}
	return errorCode(err)
}
