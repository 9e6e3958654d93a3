package protocol

import (
	"cmp"
	"context"
	"path/filepath"
	"slices"
	"syscall"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/acl"
)

// DescribeLogDirs: v0-4
//
// Behaviour (kafka-log-dirs.sh, AdminClient.describeLogDirs):
//   - One log directory, the broker's data directory (absolute), with every
//     partition this broker holds a replica of, leader or follower: its size
//     in bytes and an offset lag of 0 (there are no future replicas, which
//     is what Kafka's lag measures).
//   - Null topics: every partition; otherwise those named that are held
//     here (others are left out, as Kafka leaves them).
//   - v4+: the directory's total and usable bytes, from its file system.
//
// Authorization: DESCRIBE on the cluster (CLUSTER_AUTHORIZATION_FAILED, v3+;
// no directories before).

func init() { register(35, 0, 4, handleDescribeLogDirs) }

func handleDescribeLogDirs(_ context.Context, b *Broker, r *Request) (*Response, error) {
	req := r.Body.(*kmsg.DescribeLogDirsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeLogDirsResponse)
	if !b.allowedCluster(r, acl.Describe) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return reply(resp)
	}
	wanted := func(topic string, partition int32) bool {
		if req.Topics == nil {
			return true
		}
		for _, t := range req.Topics {
			if t.Topic == topic && slices.Contains(t.Partitions, partition) {
				return true
			}
		}
		return false
	}
	dir := kmsg.NewDescribeLogDirsResponseDir()
	dir.Dir = b.Config.DataDir
	if abs, err := filepath.Abs(dir.Dir); err == nil {
		dir.Dir = abs
	}
	byTopic := map[string]int{}
	parts := b.Replicas.Partitions()
	slices.SortFunc(parts, func(x, y Partition) int {
		xt, yt := x.TopicPartition(), y.TopicPartition()
		return cmp.Or(cmp.Compare(xt.Topic, yt.Topic), cmp.Compare(xt.Partition, yt.Partition))
	})
	for _, p := range parts {
		tp := p.TopicPartition()
		if !wanted(tp.Topic, tp.Partition) {
			continue
		}
		i, ok := byTopic[tp.Topic]
		if !ok {
			i = len(dir.Topics)
			byTopic[tp.Topic] = i
			t := kmsg.NewDescribeLogDirsResponseDirTopic()
			t.Topic = tp.Topic
			dir.Topics = append(dir.Topics, t)
		}
		sp := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
		sp.Partition, sp.Size = tp.Partition, p.Size()
		dir.Topics[i].Partitions = append(dir.Topics[i].Partitions, sp)
	}
	var fs syscall.Statfs_t
	if err := syscall.Statfs(dir.Dir, &fs); err == nil {
		dir.TotalBytes = int64(fs.Blocks) * fs.Bsize
		dir.UsableBytes = int64(fs.Bavail) * fs.Bsize
	} else {
		dir.TotalBytes, dir.UsableBytes = -1, -1
	}
	resp.Dirs = append(resp.Dirs, dir)
	return reply(resp)
}
