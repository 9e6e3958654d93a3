package testutil

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ProcessCluster is N brokers running the real binary, each a voter of the
// metadata quorum, on loopback ports kept across restarts.
type ProcessCluster struct {
	Procs []*Process
}

// StartProcessCluster starts n `strand serve` processes (node ids 0..n-1)
// with extra arguments each, and waits until every one of them lists n
// live brokers.
func StartProcessCluster(t testing.TB, n int, extra ...string) *ProcessCluster {
	t.Helper()
	return StartProcessClusterEach(t, n, nil, extra...)
}

// StartProcessClusterEach is StartProcessCluster with each node's own
// arguments too (each may be nil), such as its rack.
func StartProcessClusterEach(t testing.TB, n int, each func(node int) []string, extra ...string) *ProcessCluster {
	t.Helper()
	controllers := make([]string, n)
	var voters []string
	for i := range n {
		controllers[i] = FreePort(t)
		voters = append(voters, fmt.Sprintf("%d@%s", i, controllers[i]))
	}
	c := &ProcessCluster{}
	for i := range n {
		args := append([]string{"--node-id", fmt.Sprint(i), "--listeners", "CONTROLLER://" + controllers[i],
			"--controller-quorum-voters", strings.Join(voters, ",")}, extra...)
		if each != nil {
			args = append(args, each(i)...)
		}
		c.Procs = append(c.Procs, StartProcess(t, "", args...))
	}
	c.WaitLive(t, n, 30*time.Second)
	return c
}

// Seeds lists every broker's client address.
func (c *ProcessCluster) Seeds() []string {
	var out []string
	for _, p := range c.Procs {
		out = append(out, p.Addr)
	}
	return out
}

// WaitLive waits until every running broker's metadata lists want brokers.
func (c *ProcessCluster) WaitLive(t testing.TB, want int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for _, p := range c.Procs {
		if p.cmd == nil {
			continue
		}
		for {
			md, err := BrokerMetadata(p.Addr)
			if err == nil && len(md.Brokers) == want {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("broker %s does not list %d brokers after %v (%v, %+v)\n%s", p.Addr, want, timeout, err, md, p.Output)
			}
			time.Sleep(25 * time.Millisecond)
		}
	}
}

// BrokerMetadata asks the broker at addr itself (not the cluster) for its
// metadata of every topic.
func BrokerMetadata(addr string) (*kmsg.MetadataResponse, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequestRetries(0), kgo.RetryTimeout(time.Second))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	return req.RequestWith(ctx, cl.SeedBrokers()[0])
}

// QuorumLeader asks the broker at addr for the metadata quorum's leader
// (DescribeQuorum): the active controller, -1 while there is none.
func QuorumLeader(addr string) (int32, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequestRetries(0), kgo.RetryTimeout(time.Second))
	if err != nil {
		return -1, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req := kmsg.NewPtrDescribeQuorumRequest()
	rt := kmsg.NewDescribeQuorumRequestTopic()
	rt.Topic = "__cluster_metadata"
	rt.Partitions = []kmsg.DescribeQuorumRequestTopicPartition{kmsg.NewDescribeQuorumRequestTopicPartition()}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl.SeedBrokers()[0])
	if err != nil {
		return -1, err
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return -1, fmt.Errorf("describe quorum: %+v", resp)
	}
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		return -1, nil
	}
	return p.LeaderID, nil
}
