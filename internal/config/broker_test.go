package config

import (
	"testing"
	"time"
)

// TestConsumerGroupSettingsBounds checks the consumer group settings as
// Kafka checks them at start: the session timeout and heartbeat interval
// within their bounds, the interval below the session, known assignors.
func TestConsumerGroupSettingsBounds(t *testing.T) {
	if err := Defaults().Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	for _, tc := range []struct {
		name string
		edit func(*Broker)
		ok   bool
	}{
		{"session below its lower bound", func(b *Broker) { b.GroupConsumerSessionTimeout = 6 * time.Second }, false},
		{"session with its bound lowered", func(b *Broker) {
			b.GroupConsumerSessionTimeout, b.GroupConsumerMinSessionTimeout = 6*time.Second, 6*time.Second
		}, true},
		{"session above its upper bound", func(b *Broker) { b.GroupConsumerSessionTimeout = 61 * time.Second }, false},
		{"heartbeat below its lower bound", func(b *Broker) { b.GroupConsumerHeartbeatInterval = time.Second }, false},
		{"heartbeat above its upper bound", func(b *Broker) { b.GroupConsumerHeartbeatInterval = 16 * time.Second }, false},
		{"heartbeat not below the session", func(b *Broker) {
			b.GroupConsumerSessionTimeout, b.GroupConsumerMinSessionTimeout = 6*time.Second, 6*time.Second
			b.GroupConsumerHeartbeatInterval, b.GroupConsumerMinHeartbeatInterval = 6*time.Second, time.Second
		}, false},
		{"unknown assignor", func(b *Broker) { b.GroupConsumerAssignors = []string{"uniform", "sticky"} }, false},
		{"no assignor", func(b *Broker) { b.GroupConsumerAssignors = nil }, false},
		{"no room for members", func(b *Broker) { b.GroupConsumerMaxSize = 0 }, false},
	} {
		b := Defaults()
		tc.edit(&b)
		if err := b.Validate(); (err == nil) != tc.ok {
			t.Errorf("%s: Validate() = %v, want ok %v", tc.name, err, tc.ok)
		}
	}
}
