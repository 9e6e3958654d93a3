package javatest

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/strandlog/strand/test/grouptest"
)

// GroupMember runs the helper's group-consume mode (a KafkaConsumer in
// group, printing grouptest's log) against addr, with name as its
// client.id. props are PROP=VALUE pairs, consumer properties or compat.*
// settings; with the classic protocol the member's session timeout is
// session and it heartbeats every 500 ms.
func GroupMember(t testing.TB, addr, topic, group, name string, session time.Duration, props ...string) *grouptest.ProcMember {
	t.Helper()
	java, cp := Helper(t)
	args := []string{"-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"}
	// More JVM options, such as a log level for the client:
	// -Dorg.slf4j.simpleLogger.log.org.apache.kafka.clients.consumer=info
	args = append(args, strings.Fields(os.Getenv("STRAND_COMPAT_JAVA_OPTS"))...)
	args = append(args, "-cp", cp, "strandlog.compat.Compat",
		"group-consume", addr, topic, group, "client.id="+name, "max.poll.interval.ms=20000", "compat.deadline.ms=240000")
	if !slices.Contains(props, "group.protocol=consumer") {
		// A consumer group member takes these from the broker; the Java
		// client refuses them with group.protocol=consumer.
		args = append(args, fmt.Sprintf("session.timeout.ms=%d", session.Milliseconds()), "heartbeat.interval.ms=500")
	}
	return grouptest.StartProcMember(t, name, "", nil, java, append(args, props...)...)
}
