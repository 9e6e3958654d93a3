package compat

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/testutil"
)

// loggerChange is one change of a BROKER_LOGGER resource.
type loggerChange struct {
	op    kmsg.IncrementalAlterConfigOp
	name  string
	level string
}

// alterLoggers changes a broker's loggers with IncrementalAlterConfigs
// and returns the error code and message.
func alterLoggers(t *testing.T, cl *kgo.Client, broker string, changes ...loggerChange) (int16, string) {
	t.Helper()
	var configs []kmsg.IncrementalAlterConfigsRequestResourceConfig
	for _, ch := range changes {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Value, c.Op = ch.name, kmsg.StringPtr(ch.level), ch.op
		configs = append(configs, c)
	}
	return alterResourceWith(t, cl, kmsg.ConfigResourceTypeBrokerLogger, broker, configs)
}

// testBrokerLoggers: a broker's loggers (BROKER_LOGGER) are described and
// changed as a real Kafka (node 1 at kafkaAddr) describes and changes its
// own: the root logger's entry alike, each refusal with Kafka's code; and
// kafka-configs.sh --entity-type broker-loggers sets a component's level,
// which its log then follows, and takes it back.
func testBrokerLoggers(t *testing.T, kafkaAddr string) {
	kcl := client(t, kafkaAddr)
	b := startBroker(t)
	scl := client(t, b.Addr)
	kroot := describeResource(t, kcl, kmsg.ConfigResourceTypeBrokerLogger, "1")["root"]
	sroot := describeResource(t, scl, kmsg.ConfigResourceTypeBrokerLogger, "0")["root"]
	if strPtr(sroot.Value) != "INFO" || sroot.Source != kroot.Source || sroot.ReadOnly != kroot.ReadOnly ||
		sroot.ConfigType != kroot.ConfigType || sroot.IsSensitive != kroot.IsSensitive || len(sroot.ConfigSynonyms) != len(kroot.ConfigSynonyms) {
		t.Errorf("root logger: %+v; Kafka: %+v", sroot, kroot)
	}
	for name, changes := range map[string][]loggerChange{
		"an unknown logger":    {{kmsg.IncrementalAlterConfigOpSet, "no.such.logger", "DEBUG"}},
		"an unknown level":     {{kmsg.IncrementalAlterConfigOpSet, "root", "LOUD"}},
		"removing the root's":  {{kmsg.IncrementalAlterConfigOpDelete, "root", ""}},
		"appending":            {{kmsg.IncrementalAlterConfigOpAppend, "root", "DEBUG"}},
		"removing an unknown":  {{kmsg.IncrementalAlterConfigOpDelete, "no.such.logger", ""}},
		"a good and a bad one": {{kmsg.IncrementalAlterConfigOpSet, "root", "WARN"}, {kmsg.IncrementalAlterConfigOpSet, "no.such.logger", "DEBUG"}},
	} {
		want, wantMsg := alterLoggers(t, kcl, "1", changes...)
		got, msg := alterLoggers(t, scl, "0", changes...)
		if got != want || strings.ReplaceAll(msg, "'0'", "'1'") != wantMsg {
			t.Errorf("%s: %v %q; Kafka answers %v %q", name, kerr.ErrorForCode(got), msg, kerr.ErrorForCode(want), wantMsg)
		}
	}
	if got := strPtr(describeResource(t, scl, kmsg.ConfigResourceTypeBrokerLogger, "0")["root"].Value); got != "INFO" {
		t.Errorf("after a refused change the root logger is %s", got)
	}

	// kafka-configs.sh turns the protocol component's debug lines on and
	// off: a refused telemetry push is one.
	refusedPush := func(clientID string) {
		t.Helper()
		req := kmsg.NewPtrPushTelemetryRequest() // without an instance id: INVALID_REQUEST
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		resp, err := req.RequestWith(ctx, client(t, b.Addr, kgo.ClientID(clientID)))
		if err != nil || resp.ErrorCode != kerr.InvalidRequest.Code {
			t.Fatalf("push without an instance id: %v, %v", resp, err)
		}
	}
	configs := func(args ...string) string {
		t.Helper()
		r := runKafkaTool(t, configTool, append([]string{"--bootstrap-server", b.Addr, "--entity-type", "broker-loggers",
			"--entity-name", "0"}, args...)...)
		if r.err != nil {
			t.Fatalf("kafka-configs.sh %s: %v", strings.Join(args, " "), r)
		}
		return r.stdout
	}
	refusedPush("before-debug")
	configs("--alter", "--add-config", "protocol=DEBUG")
	if out := configs("--describe"); !strings.Contains(out, "protocol=DEBUG") || !strings.Contains(out, "group=INFO") {
		t.Errorf("kafka-configs.sh --describe after setting protocol=DEBUG:\n%s", out)
	}
	refusedPush("after-debug")
	testutil.Eventually(t, 30*time.Second, func() error {
		if !strings.Contains(b.Output.String(), "client_id=after-debug") {
			return fmt.Errorf("no debug line for the refused push at DEBUG")
		}
		return nil
	})
	if strings.Contains(b.Output.String(), "client_id=before-debug") {
		t.Errorf("a debug line was written while the protocol logger was at INFO")
	}
	configs("--alter", "--delete-config", "protocol")
	if out := configs("--describe"); !strings.Contains(out, "protocol=INFO") {
		t.Errorf("kafka-configs.sh --describe after deleting protocol's level:\n%s", out)
	}
}
