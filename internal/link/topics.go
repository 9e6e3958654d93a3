package link

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/cluster"
)

// syncTopics brings the link's mirror topics in line with the source: it
// creates the mirrors of the topics the filter matches, grows them with
// their source, copies configs when the link syncs them and stops the
// mirrors whose source topic is gone. The active controller runs it.
func (r *runner) syncTopics(link cluster.Link, topics map[string]sourceTopic) {
	match, err := link.Topics.Compile()
	if err != nil {
		return // refused when the link was made
	}
	store, mirrors := r.m.cfg.Store, r.m.cfg.Mirrors
	var configs map[string]map[string]string
	if link.SyncTopicConfigs {
		var names []string
		for name, st := range topics {
			if mirrorable(st) && match(name) {
				names = append(names, name)
			}
		}
		configs = r.sourceConfigs(names)
	}
	for _, name := range slices.Sorted(maps.Keys(topics)) {
		st := topics[name]
		if !mirrorable(st) || !match(name) {
			continue
		}
		local, ok := store.Topic(name)
		if !ok {
			if err := mirrors.CreateMirror(name, st.id, int32(len(st.partitions)), link.Name, configs[name]); err != nil {
				r.warnOnce("create:"+name, "a mirror topic cannot be created", "topic", name, "err", err)
				continue
			}
			r.logger.Info("mirror topic created", "topic", name, "partitions", len(st.partitions), "topic_id", st.id.String())
			continue
		}
		if local.Promoted != nil && local.Promoted.Link == link.Name {
			continue // promoted: written here now
		}
		if local.Mirror == nil || local.Mirror.Link != link.Name {
			r.warnOnce("exists:"+name, "a topic of the source's name exists here and is not this link's mirror: it is not mirrored", "topic", name)
			continue
		}
		if local.Mirror.State != cluster.MirrorActive {
			continue
		}
		if local.ID != st.id {
			r.stopTopic(local, "the source topic was deleted and made again (another topic id)")
			continue
		}
		if n := int32(len(st.partitions)); n > local.Partitions {
			if err := mirrors.GrowMirror(name, n); err != nil {
				r.warnOnce("grow:"+name, "a mirror topic cannot grow with its source", "topic", name, "err", err)
			} else {
				r.logger.Info("mirror topic grew with its source", "topic", name, "partitions", n)
			}
		}
		if link.SyncTopicConfigs {
			if want, ok := configs[name]; ok && !maps.Equal(want, local.Configs) {
				if err := mirrors.SetMirrorConfigs(name, want); err != nil {
					r.warnOnce("configs:"+name, "a mirror topic's configs cannot follow the source's", "topic", name, "err", err)
				}
			}
		}
	}
	for _, t := range store.Topics() {
		if t.Mirror == nil || t.Mirror.Link != link.Name || t.Mirror.State != cluster.MirrorActive {
			continue
		}
		if _, ok := topics[t.Name]; !ok {
			r.stopTopic(t, "the source topic is gone")
		}
	}
}

// stopTopic marks a mirror topic stopped, with the reason.
func (r *runner) stopTopic(t cluster.Topic, reason string) {
	if err := r.m.cfg.Store.SetMirrorState(t.Name, t.Mirror.Link, cluster.MirrorStopped, reason); err != nil {
		r.logger.Warn("a mirror topic cannot be marked stopped", "topic", t.Name, "err", err)
		return
	}
	r.logger.Warn("mirror topic stopped", "topic", t.Name, "reason", reason)
}

// sourceConfigs reads the config overrides of source topics.
func (r *runner) sourceConfigs(names []string) map[string]map[string]string {
	if len(names) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(r.ctx, 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrDescribeConfigsRequest()
	for _, n := range names {
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, n
		req.Resources = append(req.Resources, rr)
	}
	resp, err := req.RequestWith(ctx, r.cl)
	if err != nil {
		r.warnOnce("describe-configs", "the source's topic configs cannot be read", "err", err)
		return nil
	}
	out := map[string]map[string]string{}
	for _, res := range resp.Resources {
		if kerr.ErrorForCode(res.ErrorCode) != nil {
			continue
		}
		cfg := map[string]string{}
		for _, c := range res.Configs {
			if c.Source == kmsg.ConfigSourceDynamicTopicConfig && c.Value != nil && !c.IsSensitive {
				cfg[c.Name] = *c.Value
			}
		}
		out[res.ResourceName] = cfg
	}
	return out
}

// warnOnce logs a warning the first time for key, until the runner stops:
// the sync runs every few seconds.
func (r *runner) warnOnce(key, msg string, args ...any) {
	r.mu.Lock()
	if r.warned == nil {
		r.warned = map[string]bool{}
	}
	seen := r.warned[key]
	r.warned[key] = true
	r.mu.Unlock()
	if !seen {
		r.logger.Warn(msg, args...)
	}
}
