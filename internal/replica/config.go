package replica

import "github.com/strandlog/strand/internal/log"

// Config is one partition's settings: how its log stores (the embedded
// log.Config) and how it is replicated. Field comments name the Kafka
// topic config each one follows.
type Config struct {
	log.Config
	// MinInSyncReplicas is min.insync.replicas: the in-sync replicas an
	// acks=all write needs.
	MinInSyncReplicas int
	// UncleanLeaderElection is unclean.leader.election.enable, which the
	// cluster metadata applies when it elects; kept with the topic's
	// other replication settings.
	UncleanLeaderElection bool
	// LeaderThrottledReplicas and FollowerThrottledReplicas are
	// leader.replication.throttled.replicas and
	// follower.replication.throttled.replicas: the replicas
	// ("partition:broker" pairs, or "*" for all) whose copying the
	// brokers' replication throttle rates cap (ThrottleListed).
	LeaderThrottledReplicas, FollowerThrottledReplicas string
}

// Defaults returns Kafka's topic defaults (log.Defaults for the storage).
func Defaults() Config {
	return Config{Config: log.Defaults(), MinInSyncReplicas: 1}
}
