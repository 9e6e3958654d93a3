package group

import "errors"

// Errors of the group coordinator. protocol/errors.go maps each to its
// Kafka code; the names say which.
var (
	ErrInvalidGroupID            = errors.New("group: invalid group id")
	ErrInvalidSessionTimeout     = errors.New("group: session timeout outside the broker's limits")
	ErrInconsistentGroupProtocol = errors.New("group: protocol type or protocols inconsistent with the group's")
	ErrUnknownMemberID           = errors.New("group: unknown member id")
	ErrMemberIDRequired          = errors.New("group: member id required")
	ErrFencedInstanceID          = errors.New("group: fenced instance id")
	ErrIllegalGeneration         = errors.New("group: illegal generation")
	ErrRebalanceInProgress       = errors.New("group: rebalance in progress")
	ErrGroupMaxSizeReached       = errors.New("group: group max size reached")
	ErrCoordinatorNotAvailable   = errors.New("group: coordinator not available")
	ErrFencedMemberEpoch         = errors.New("group: fenced member epoch")
	ErrStaleMemberEpoch          = errors.New("group: stale member epoch")
	ErrUnreleasedInstanceID      = errors.New("group: unreleased instance id")
	ErrUnsupportedAssignor       = errors.New("group: unsupported assignor")
	ErrInvalidRequest            = errors.New("group: invalid request")
	ErrInvalidRegularExpression  = errors.New("group: invalid regular expression")
	ErrUnsupportedVersion        = errors.New("group: unsupported version")
	// ErrNotCoordinator: the coordinator is shutting down, or its
	// __consumer_offsets partition failed to take a write (Kafka answers
	// NOT_COORDINATOR for both, and clients find the coordinator again).
	ErrNotCoordinator = errors.New("group: not coordinator")
	// ErrCoordinatorLoadInProgress: this broker has just become the
	// group's coordinator and is still replaying its partition.
	ErrCoordinatorLoadInProgress = errors.New("group: coordinator load in progress")
	ErrGroupIDNotFound           = errors.New("group: group id not found")
	ErrNonEmptyGroup             = errors.New("group: group is not empty")
	ErrGroupSubscribedToTopic    = errors.New("group: group is subscribed to the topic")
	ErrOffsetMetadataTooLarge    = errors.New("group: offset metadata too large")
	ErrUnknownServerError        = errors.New("group: internal error")
	ErrInvalidCommitOffsetSize   = errors.New("group: offset commit too large to store")
	// ErrUnstableOffsetCommit is a partition's error in an OffsetFetch
	// with RequireStable while an open transaction has an offset of it
	// pending.
	ErrUnstableOffsetCommit = errors.New("group: unstable offset commit: a transaction has an offset of the partition pending")
)

// ErrRecordTooLarge: a record batch exceeds __consumer_offsets' size limit
// (a group with a huge assignment).
var ErrRecordTooLarge = errors.New("group: record too large for __consumer_offsets")
