package main

import (
	"slices"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/strandlog/strand/internal/config"
)

// TestFlagsFromBrokerDefs: each setting's flag sets it, with its default
// the built-in one, and a ms flag reads milliseconds.
func TestFlagsFromBrokerDefs(t *testing.T) {
	b := config.Defaults()
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	bindSettings(fs, &b)
	flags := 0
	for _, d := range config.BrokerDefs {
		if d.Flag == "" {
			continue
		}
		flags++
		f := fs.Lookup(d.Flag)
		if f == nil {
			t.Fatalf("no flag --%s for %s", d.Flag, d.Name)
		}
	}
	if flags < 50 {
		t.Fatalf("%d settings with a flag", flags)
	}
	if err := fs.Parse([]string{"--retention-ms", "-1", "--segment-ms", "60000", "--group-member-disconnect-grace", "5s",
		"--node-id", "7", "--group-consumer-assignors", "range,uniform", "--auto-create-topics=false"}); err != nil {
		t.Fatal(err)
	}
	if b.Topic.RetentionTime != -1 || b.Topic.SegmentTime != time.Minute || b.GroupMemberDisconnectGrace != 5*time.Second ||
		b.NodeID != 7 || !slices.Equal(b.GroupConsumerAssignors, []string{"range", "uniform"}) || b.AutoCreateTopics {
		t.Fatalf("after the flags: %+v", b)
	}
	for name, want := range map[string]string{"log.retention.ms": "-1", "log.roll.ms": "60000",
		"group.member.disconnect.grace.ms": "5000", "node.id": "7", "group.consumer.assignors": "range,uniform",
		"auto.create.topics.enable": "false", "offsets.retention.minutes": "10080",
		"leader.imbalance.check.interval.seconds": "300"} {
		d, _ := config.LookupBrokerDef(name)
		if got := d.Get(b); got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
}
