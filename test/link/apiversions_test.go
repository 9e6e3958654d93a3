package link

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/testutil"
)

// apiRanges asks addr for the versions it serves of each API.
func apiRanges(t *testing.T, addr string) map[int16][2]int16 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrApiVersionsRequest()
	req.ClientSoftwareName, req.ClientSoftwareVersion = "strand-test", "1"
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil || resp.ErrorCode != 0 {
		t.Fatalf("ApiVersions of %s: %v %+v", addr, err, resp)
	}
	out := map[int16][2]int16{}
	for _, k := range resp.ApiKeys {
		out[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
	}
	return out
}

// TestShareAPIsServedAsKafka: Strand serves the share group APIs (KIP-932)
// and the group APIs that know share groups at the versions the Kafka the
// link mirrors serves, so a client picks the same version of each from
// either.
func TestShareAPIsServedAsKafka(t *testing.T) {
	kafka := apiRanges(t, startKafka(t, 1, nil).Addrs()[0])
	strand := apiRanges(t, testutil.StartBroker(t, nil).Addr)
	keys := []int16{
		10, 16, 42, // FindCoordinator (its share type), ListGroups, DeleteGroups
		76, 77, 78, 79, // ShareGroupHeartbeat, ShareGroupDescribe, ShareFetch, ShareAcknowledge
		83, 84, 85, 86, 87, // the share-group state, between brokers
		90, 91, 92, // Describe, Alter and DeleteShareGroupOffsets
	}
	for _, k := range keys {
		kv, inKafka := kafka[k]
		sv, inStrand := strand[k]
		if !inKafka || !inStrand || kv != sv {
			t.Errorf("%s: Kafka serves %v (listed %v), Strand %v (listed %v)", kmsg.NameForKey(k), kv, inKafka, sv, inStrand)
		}
	}
}
