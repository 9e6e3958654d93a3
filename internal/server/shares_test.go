package server_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/protocol"
	"github.com/strandlog/strand/internal/testutil"
)

// enableShareGroups finalizes share.version 1, as kafka-features.sh
// upgrade --feature share.version=1 does.
func enableShareGroups(t *testing.T, cl *kgo.Client) {
	t.Helper()
	req := kmsg.NewPtrUpdateFeaturesRequest()
	u := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
	u.Feature, u.MaxVersionLevel, u.UpgradeType = protocol.ShareVersionFeature, 1, 1
	req.FeatureUpdates = append(req.FeatureUpdates, u)
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil || resp.ErrorCode != 0 {
		t.Fatalf("UpdateFeatures share.version=1: %v %+v", err, resp)
	}
}

// setGroupConfig sets one of a group's configs, as kafka-configs.sh
// --entity-type groups --alter does.
func setGroupConfig(t *testing.T, cl *kgo.Client, group, name, value string) {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Value = name, &value
	res.Configs = append(res.Configs, c)
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil || len(resp.Resources) != 1 || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("set %s=%s on group %s: %v %+v", name, value, group, err, resp)
	}
}

func apiListed(t *testing.T, cl *kgo.Client, key int16) bool {
	t.Helper()
	resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	return slices.ContainsFunc(resp.ApiKeys, func(k kmsg.ApiVersionsResponseApiKey) bool { return k.ApiKey == key })
}

// TestShareGroupsNeedTheFeature: the share group APIs are listed and
// served only once share.version is 1.
func TestShareGroupsNeedTheFeature(t *testing.T) {
	b := testutil.StartBroker(t, nil)
	cl := newClient(t, b.Addr)
	for _, key := range []int16{76, 78, 79} {
		if apiListed(t, cl, key) {
			t.Fatalf("API %d listed with share.version 0", key)
		}
	}
	enableShareGroups(t, cl)
	// A fresh client: the first one keeps the versions it was told.
	cl = newClient(t, b.Addr)
	for _, key := range []int16{76, 78, 79} {
		if !apiListed(t, cl, key) {
			t.Fatalf("API %d not listed with share.version 1", key)
		}
	}
}

// TestShareGroupConsumers: eight franz-go share consumers read a
// three-partition topic together. Every record is accepted exactly once;
// the records released at their first delivery (those ending in 7) are
// delivered again, counted as a second delivery; and once all is
// acknowledged a new member acquires nothing.
func TestShareGroupConsumers(t *testing.T) {
	t.Parallel() // Slow: eight clients poll until 600 records are accepted.
	b := testutil.StartBroker(t, nil)
	admin := newClient(t, b.Addr)
	enableShareGroups(t, admin)
	const topic, group, n = "queue", "workers", 600
	if _, err := kadm.NewClient(admin).CreateTopic(context.Background(), 3, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	setGroupConfig(t, admin, group, "share.auto.offset.reset", "earliest")
	prod := newClient(t, b.Addr, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Value: []byte(fmt.Sprintf("job-%03d", i))})
	}
	if err := prod.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// Polls end once every record is accepted.
	pollCtx, allAccepted := context.WithCancel(ctx)
	defer allAccepted()
	var (
		mu         sync.Mutex
		accepted   = map[string]int{}
		deliveries = map[string][]int32{}
		ackErrs    []error
		wg         sync.WaitGroup
	)
	for c := range 8 {
		_ = c
		cl := newClient(t, b.Addr, kgo.ShareGroup(group), kgo.ConsumeTopics(topic), kgo.FetchMaxWait(200*time.Millisecond),
			kgo.ShareAckCallback(func(_ *kgo.Client, rs kgo.ShareAckResults) {
				if err := rs.Error(); err != nil {
					mu.Lock()
					ackErrs = append(ackErrs, err)
					mu.Unlock()
				}
			}))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for pollCtx.Err() == nil {
				fs := cl.PollRecords(pollCtx, 50)
				fs.EachRecord(func(r *kgo.Record) {
					v := string(r.Value)
					mu.Lock()
					deliveries[v] = append(deliveries[v], r.DeliveryCount())
					release := r.DeliveryCount() == 1 && v[len(v)-1] == '7'
					if !release {
						accepted[v]++
					}
					if len(accepted) == n {
						allAccepted()
					}
					mu.Unlock()
					if release {
						cl.MarkAcks(kgo.AckRelease, r)
					} else {
						cl.MarkAcks(kgo.AckAccept, r)
					}
				})
			}
			flushCtx, stop := context.WithTimeout(context.Background(), 10*time.Second)
			defer stop()
			if err := cl.FlushAcks(flushCtx); err != nil {
				t.Errorf("consumer %d flushing its acknowledgements: %v", c, err)
			}
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		t.Fatalf("%d of %d records accepted in time", len(accepted), n)
	}
	if len(ackErrs) > 0 {
		t.Fatalf("acknowledgements failed: %v", ackErrs)
	}
	released := 0
	for i := range n {
		v := fmt.Sprintf("job-%03d", i)
		if accepted[v] != 1 {
			t.Fatalf("%s accepted %d times", v, accepted[v])
		}
		ds := deliveries[v]
		for j, d := range ds {
			if d != int32(j+1) {
				t.Fatalf("%s delivered with counts %v", v, ds)
			}
		}
		if len(ds) > 1 {
			released++
		}
	}
	if released != n/10 {
		t.Fatalf("%d records delivered twice, want the %d released", released, n/10)
	}

	// Everything is acknowledged: a new member acquires nothing.
	late := newClient(t, b.Addr, kgo.ShareGroup(group), kgo.ConsumeTopics(topic), kgo.FetchMaxWait(100*time.Millisecond))
	lateCtx, lateCancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer lateCancel()
	if fs := late.PollRecords(lateCtx, 10); fs.NumRecords() > 0 {
		t.Fatalf("a new member acquired %d records after all were accepted", fs.NumRecords())
	}
}
