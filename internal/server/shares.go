package server

import (
	"strconv"
	"time"

	"github.com/strandlog/strand/internal/cluster"
	"github.com/strandlog/strand/internal/config"
	"github.com/strandlog/strand/internal/protocol"
	"github.com/strandlog/strand/internal/share"
)

// newShares wires the share groups (KIP-932): their members, assigned
// over the cluster's topics, and the share-partitions of the partitions
// this broker leads, each with its group's settings: the group's share.*
// configs over the broker's group.share.* settings.
func newShares(cfg config.Broker, metadata *cluster.Store) *protocol.Shares {
	topics := func(names []string) map[string]share.TopicInfo {
		out := make(map[string]share.TopicInfo, len(names))
		for _, n := range names {
			if t, ok := metadata.Topic(n); ok {
				out[n] = share.TopicInfo{ID: [16]byte(t.ID), Partitions: int32(len(t.States))}
			}
		}
		return out
	}
	groupInt := func(group, name string, def int64) int64 {
		if v, ok := metadata.GroupConfig(group, name); ok {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				return n
			}
		}
		return def
	}
	return &protocol.Shares{
		Groups: share.NewCoordinator(share.GroupLimits{SessionTimeout: cfg.GroupShareSessionTimeout,
			HeartbeatInterval: cfg.GroupShareHeartbeatInterval, MaxSize: int(cfg.GroupShareMaxSize)}, topics),
		Leader: share.NewLeader(int(cfg.GroupShareMaxSessions)),
		Limits: func(group string) share.Limits {
			return share.Limits{
				DeliveryLimit: int16(groupInt(group, "share.delivery.count.limit", int64(cfg.GroupShareDeliveryLimit))),
				MaxInFlight:   int(groupInt(group, "share.partition.max.record.locks", int64(cfg.GroupShareRecordLocks))),
				LockDuration: time.Duration(groupInt(group, "share.record.lock.duration.ms",
					cfg.GroupShareRecordLock.Milliseconds())) * time.Millisecond,
			}
		},
		AutoOffsetReset: func(group string) string {
			if v, ok := metadata.GroupConfig(group, "share.auto.offset.reset"); ok {
				return v
			}
			return "latest"
		},
		Now: time.Now,
	}
}
