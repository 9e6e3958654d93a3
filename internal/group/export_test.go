package group

import (
	"math"
	"time"
)

// Defaults are Kafka 4's defaults of the coordinator's settings, what the
// tests start from; the broker's own are config.BrokerDefs'.
func Defaults() Config {
	return Config{
		InitialRebalanceDelay:  3 * time.Second,
		MinSessionTimeout:      6 * time.Second,
		MaxSessionTimeout:      30 * time.Minute,
		MaxSize:                math.MaxInt32,
		OffsetsPartitions:      50,
		OffsetsRetention:       7 * 24 * time.Hour,
		OffsetsRetentionCheck:  10 * time.Minute,
		OffsetMetadataMaxBytes: 4096,

		ConsumerSessionTimeout:    45 * time.Second,
		ConsumerHeartbeatInterval: 5 * time.Second,
		ConsumerMaxSize:           math.MaxInt32,
		ConsumerAssignors:         []string{"uniform", "range"},
		ConsumerMigrationPolicy:   MigrationBidirectional,
		DisconnectGrace:           2 * time.Second,
	}
}
