package compat

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/strandlog/strand/internal/testutil"
	"github.com/strandlog/strand/test/grouptest"
	"github.com/strandlog/strand/test/javatest"
)

// TestClientTelemetryJava: a client metrics subscription made with
// kafka-client-metrics.sh asks the Java consumers it matches for their
// consumer metrics (KIP-714); they push them and /metrics exports them by
// client id and software. The consumer's own count of records consumed,
// pushed as a total, is every record produced; a consumer the
// subscription does not match pushes nothing.
func TestClientTelemetryJava(t *testing.T) {
	t.Parallel()
	javatest.Helper(t)
	b := startBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	adm := kadm.NewClient(client(t, b.Addr))
	if r, err := adm.CreateTopic(ctx, 2, 1, nil, "telemetry"); err != nil || r.Err != nil {
		t.Fatal(err, r.Err)
	}
	const n = 200
	produceKeyed(t, ctx, b.Addr, "telemetry", "r", n, grouptest.Produced{})
	if r := runKafkaTool(t, clientMetricsTool, "--bootstrap-server", b.Addr, "--alter", "--name", "java-consumers",
		"--metrics", "org.apache.kafka.consumer.", "--interval", "500",
		"--match", "client_id=pushing-.*,client_software_name=apache-kafka-java"); r.err != nil {
		t.Fatalf("kafka-client-metrics.sh --alter: %v", r)
	}

	pushing := javatest.GroupMember(t, b.Addr, "telemetry", "pushing-group", "pushing-1", 10*time.Second)
	silent := javatest.GroupMember(t, b.Addr, "telemetry", "silent-group", "silent-1", 10*time.Second)
	const consumed = "org_apache_kafka_consumer_fetch_manager_records_consumed_total"
	testutil.Eventually(t, time.Minute, func() error {
		for _, m := range []*grouptest.ProcMember{pushing, silent} {
			if err := m.Crashed(); err != nil {
				return err
			}
		}
		if got := silent.Log().Count(grouptest.Processed); got < n {
			return fmt.Errorf("silent-1 processed %d records of %d", got, n)
		}
		fams := grouptest.Scrape(t, b.Admin)
		v, ok := grouptest.Sample(fams, consumed, map[string]string{"client_id": "pushing-1", "client_software_name": "apache-kafka-java"})
		if !ok || v < n {
			return fmt.Errorf("%s of pushing-1: %v (exported: %v), want %d", consumed, v, ok, n)
		}
		return nil
	})
	fams := grouptest.Scrape(t, b.Admin)
	if f := fams[consumed]; f == nil || f.GetType().String() != "COUNTER" {
		t.Errorf("%s is not exported as a counter: %v", consumed, f)
	}
	for name, f := range fams {
		for _, m := range f.Metric {
			for _, l := range m.Label {
				if l.GetName() == "client_id" && l.GetValue() == "silent-1" {
					t.Errorf("%s exported for silent-1, which no subscription matches", name)
				}
				if l.GetName() == "client_id" && l.GetValue() == "pushing-1" && !strings.HasPrefix(name, "org_apache_kafka_consumer_") {
					t.Errorf("%s exported for pushing-1, whose subscription asks for consumer metrics only", name)
				}
			}
		}
	}
}
