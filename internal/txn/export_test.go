package txn

import "time"

// Defaults are Kafka 4's defaults of the coordinator's settings, what the
// tests start from; the broker's own are config.BrokerDefs'.
func Defaults() Config {
	return Config{
		StatePartitions:    50,
		MaxTimeout:         15 * time.Minute,
		IDExpiration:       7 * 24 * time.Hour,
		AbortCheckInterval: 10 * time.Second,
	}
}
