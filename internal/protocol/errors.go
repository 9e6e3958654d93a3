package protocol

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strandlog/strand/internal/cluster"
	"github.com/strandlog/strand/internal/config"
	"github.com/strandlog/strand/internal/group"
	"github.com/strandlog/strand/internal/replica"
	"github.com/strandlog/strand/internal/share"
	"github.com/strandlog/strand/internal/txn"
)

// codes maps the packages' errors to Kafka error codes; the first match in
// the chain wins.
var codes = []struct {
	err  error
	code int16
}{
	{replica.ErrCorruptMessage, kerr.CorruptMessage.Code},
	{replica.ErrInvalidRecord, kerr.InvalidRecord.Code},
	{replica.ErrUnsupportedMagic, kerr.UnsupportedForMessageFormat.Code},
	{replica.ErrUnsupportedCompression, kerr.UnsupportedCompressionType.Code},
	{replica.ErrMessageTooLarge, kerr.MessageTooLarge.Code},
	{replica.ErrInvalidTimestamp, kerr.InvalidTimestamp.Code},
	{replica.ErrOffsetOutOfRange, kerr.OffsetOutOfRange.Code},
	{replica.ErrClosed, kerr.NotLeaderForPartition.Code},
	{replica.ErrStorage, kerr.KafkaStorageError.Code},
	{replica.ErrCorruptLog, kerr.KafkaStorageError.Code},
	{replica.ErrUnknownPartition, kerr.UnknownTopicOrPartition.Code},
	{replica.ErrOutOfOrderSequence, kerr.OutOfOrderSequenceNumber.Code},
	{replica.ErrInvalidProducerEpoch, kerr.InvalidProducerEpoch.Code},
	{replica.ErrUnknownProducerID, kerr.UnknownProducerID.Code},
	{replica.ErrInvalidTxnState, kerr.InvalidTxnState.Code},
	{replica.ErrTransactionCoordinatorFenced, kerr.TransactionCoordinatorFenced.Code},
	{txn.ErrConcurrentTransactions, kerr.ConcurrentTransactions.Code},
	{txn.ErrInvalidTxnState, kerr.InvalidTxnState.Code},
	{txn.ErrProducerFenced, kerr.ProducerFenced.Code},
	{txn.ErrInvalidProducerIDMapping, kerr.InvalidProducerIDMapping.Code},
	{txn.ErrInvalidTransactionTimeout, kerr.InvalidTransactionTimeout.Code},
	{txn.ErrTransactionalIDNotFound, kerr.TransactionalIDNotFound.Code},
	{txn.ErrNotCoordinator, kerr.NotCoordinator.Code},
	{txn.ErrCoordinatorLoadInProgress, kerr.CoordinatorLoadInProgress.Code},
	{txn.ErrInvalidRequest, kerr.InvalidRequest.Code},
	{group.ErrUnstableOffsetCommit, kerr.UnstableOffsetCommit.Code},
	{cluster.ErrTopicExists, kerr.TopicAlreadyExists.Code},
	{cluster.ErrUnknownTopic, kerr.UnknownTopicOrPartition.Code},
	{cluster.ErrInvalidTopic, kerr.InvalidTopicException.Code},
	{cluster.ErrInvalidPartitions, kerr.InvalidPartitions.Code},
	{cluster.ErrMirrorTopic, kerr.InvalidRequest.Code},
	{config.ErrInvalidConfig, kerr.InvalidConfig.Code},
	{config.ErrUnknownConfig, kerr.InvalidConfig.Code},
	{config.ErrInvalidRequest, kerr.InvalidRequest.Code},
	{replica.ErrFencedLeaderEpoch, kerr.FencedLeaderEpoch.Code},
	{replica.ErrNotEnoughReplicas, kerr.NotEnoughReplicas.Code},
	{replica.ErrNotEnoughReplicasAfterAppend, kerr.NotEnoughReplicasAfterAppend.Code},
	{replica.ErrReplicationTimeout, kerr.RequestTimedOut.Code},
	{replica.ErrNotLeader, kerr.NotLeaderForPartition.Code},
	{replica.ErrMirrorReadOnly, kerr.InvalidRequest.Code},
	{replica.ErrNotReplica, kerr.NotLeaderForPartition.Code},
	{errNotLeader, kerr.NotLeaderForPartition.Code},
	{cluster.ErrInvalidReplicationFactor, kerr.InvalidReplicationFactor.Code},
	{cluster.ErrInvalidReplicaAssignment, kerr.InvalidReplicaAssignment.Code},
	{cluster.ErrNotAvailable, kerr.RequestTimedOut.Code},
	{cluster.ErrElectionNotNeeded, kerr.ElectionNotNeeded.Code},
	{cluster.ErrNoReassignmentInProgress, kerr.NoReassignmentInProgress.Code},
	{cluster.ErrPreferredLeaderNotAvailable, kerr.PreferredLeaderNotAvailable.Code},
	{cluster.ErrEligibleLeadersNotAvailable, kerr.EligibleLeadersNotAvailable.Code},
	{replica.ErrUnknownLeaderEpoch, kerr.UnknownLeaderEpoch.Code},
	{errInvalidRequest, kerr.InvalidRequest.Code},
	{errNotEnoughReplicas, kerr.NotEnoughReplicas.Code},
	{errInvalidRegex, kerr.InvalidRegularExpression.Code},
	{errInvalidReplicationFactor, kerr.InvalidReplicationFactor.Code},
	{errInvalidReplicaAssignment, kerr.InvalidReplicaAssignment.Code},
	{errPolicyViolation, kerr.PolicyViolation.Code},
	{errUnknownTopicID, kerr.UnknownTopicID.Code},
	{group.ErrInvalidGroupID, kerr.InvalidGroupID.Code},
	{group.ErrInvalidSessionTimeout, kerr.InvalidSessionTimeout.Code},
	{group.ErrInconsistentGroupProtocol, kerr.InconsistentGroupProtocol.Code},
	{group.ErrUnknownMemberID, kerr.UnknownMemberID.Code},
	{share.ErrUnknownMember, kerr.UnknownMemberID.Code},
	{share.ErrFencedEpoch, kerr.FencedMemberEpoch.Code},
	{share.ErrGroupFull, kerr.GroupMaxSizeReached.Code},
	{share.ErrInvalidRequest, kerr.InvalidRequest.Code},
	{share.ErrNotShareGroup, kerr.GroupIDNotFound.Code},
	{share.ErrInvalidRecordState, kerr.InvalidRecordState.Code},
	{share.ErrFencedLeaderEpoch, kerr.FencedLeaderEpoch.Code},
	{share.ErrFencedStateEpoch, kerr.FencedStateEpoch.Code},
	{share.ErrSessionNotFound, kerr.ShareSessionNotFound.Code},
	{share.ErrInvalidSessionEpoch, kerr.InvalidShareSessionEpoch.Code},
	{share.ErrSessionLimit, kerr.ShareSessionLimitReached.Code},
	{group.ErrMemberIDRequired, kerr.MemberIDRequired.Code},
	{group.ErrFencedInstanceID, kerr.FencedInstanceID.Code},
	{group.ErrIllegalGeneration, kerr.IllegalGeneration.Code},
	{group.ErrRebalanceInProgress, kerr.RebalanceInProgress.Code},
	{group.ErrGroupMaxSizeReached, kerr.GroupMaxSizeReached.Code},
	{group.ErrCoordinatorNotAvailable, kerr.CoordinatorNotAvailable.Code},
	{group.ErrNotCoordinator, kerr.NotCoordinator.Code},
	{group.ErrCoordinatorLoadInProgress, kerr.CoordinatorLoadInProgress.Code},
	{group.ErrGroupIDNotFound, kerr.GroupIDNotFound.Code},
	{group.ErrFencedMemberEpoch, kerr.FencedMemberEpoch.Code},
	{group.ErrStaleMemberEpoch, kerr.StaleMemberEpoch.Code},
	{group.ErrUnreleasedInstanceID, kerr.UnreleasedInstanceID.Code},
	{group.ErrUnsupportedAssignor, kerr.UnsupportedAssignor.Code},
	{group.ErrInvalidRequest, kerr.InvalidRequest.Code},
	{group.ErrInvalidRegularExpression, kerr.InvalidRegularExpression.Code},
	{group.ErrUnsupportedVersion, kerr.UnsupportedVersion.Code},
	{group.ErrNonEmptyGroup, kerr.NonEmptyGroup.Code},
	{group.ErrGroupSubscribedToTopic, kerr.GroupSubscribedToTopic.Code},
	{group.ErrOffsetMetadataTooLarge, kerr.OffsetMetadataTooLarge.Code},
	{group.ErrInvalidCommitOffsetSize, kerr.InvalidCommitOffsetSize.Code},
	{group.ErrUnknownServerError, kerr.UnknownServerError.Code},
}

// Errors of the transaction handlers' own checks.
var (
	// errNotEnoughReplicas: what Kafka answers older producers for a
	// transaction that cannot take their batch yet, so they retry.
	errNotEnoughReplicas = errors.New("not enough replicas")
	errInvalidRegex      = errors.New("invalid regular expression")
)

// errorCode returns the Kafka code for err: 0 for nil, UNKNOWN_SERVER_ERROR
// for anything unmapped.
func errorCode(err error) int16 {
	if err == nil {
		return 0
	}
	var ke *kerr.Error
	if errors.As(err, &ke) { // a check that answers Kafka's code itself
		return ke.Code
	}
	for _, c := range codes {
		if errors.Is(err, c.err) {
			return c.code
		}
	}
	return kerr.UnknownServerError.Code
}

// errorMessage returns err's text for responses that carry one.
func errorMessage(err error) *string {
	if err == nil {
		return nil
	}
	s := err.Error()
	return &s
}
