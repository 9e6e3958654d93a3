package cluster

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandlog/strand/internal/testutil"
)

// `strand dev-cluster` starts three brokers that form one cluster, prints
// their bootstrap address, serves clients, and stops on SIGTERM; started
// again on its directory it is the same cluster.
func TestDevCluster(t *testing.T) {
	var dir string
	var base int
	// inUse is set when the ports were taken: the first start tries
	// others.
	inUse := false
	run := func() (*exec.Cmd, string) {
		cmd := exec.Command(testutil.Binary(t), "dev-cluster", "--brokers", "3", "--data-dir", dir,
			"--port", fmt.Sprint(base), "--admin-port", fmt.Sprint(base+200), "--log-level", "warn")
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		line := make(chan string, 1)
		go func() {
			sc := bufio.NewScanner(out)
			if sc.Scan() {
				line <- sc.Text()
			}
			close(line)
		}()
		select {
		case l, ok := <-line:
			if !ok {
				cmd.Wait()
				if strings.Contains(stderr.String(), "address already in use") {
					inUse = true
					return nil, ""
				}
				t.Fatalf("dev-cluster printed no bootstrap line: %s", stderr.String())
			}
			return cmd, l
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			t.Fatal("no bootstrap line within 30 s")
		}
		return nil, ""
	}
	var cmd *exec.Cmd
	var bootstrap string
	for attempt := 0; ; attempt++ {
		// Below Linux's ephemeral ports (32768 up), which other tests'
		// connections take at random; another test may hold some.
		dir, base, inUse = t.TempDir(), 20000+rand.IntN(12000), false
		if cmd, bootstrap = run(); !inUse {
			break
		}
		if attempt == 4 {
			t.Fatal("dev-cluster found its ports taken 5 times")
		}
	}
	want := fmt.Sprintf("127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d", base, base+1, base+2)
	if bootstrap != want {
		cmd.Process.Kill()
		t.Fatalf("bootstrap %q, want %q", bootstrap, want)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(bootstrap, ",")...), kgo.DefaultProduceTopic("dev"))
	if err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 3, 1, nil, "dev"); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("hello")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	brokers, err := adm.ListBrokers(ctx)
	if err != nil || len(brokers) != 3 {
		t.Fatalf("brokers %v %v", brokers, err)
	}
	// Each broker's admin listener is on --admin-port+i, and names the
	// quorum's leader as controller.
	leader, err := testutil.QuorumLeader(fmt.Sprintf("127.0.0.1:%d", base))
	if err != nil || leader < 0 {
		t.Fatalf("the quorum's leader: %d %v", leader, err)
	}
	for i := range 3 {
		var health struct {
			Controller int32 `json:"controller"`
		}
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/api/health", base+200+i))
		if err != nil {
			t.Fatalf("broker %d admin listener: %v", i, err)
		}
		err = json.NewDecoder(resp.Body).Decode(&health)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || err != nil || health.Controller != leader {
			t.Fatalf("broker %d /api/health: %s %v, controller %d; the quorum's leader is %d", i, resp.Status, err,
				health.Controller, leader)
		}
	}
	checkGroupAdmin(t, ctx, adm, base+200)
	cl.Close()
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("dev-cluster exit: %v", err)
	}

	cmd, _ = run()
	if inUse {
		t.Fatal("dev-cluster's ports were taken between its stop and its restart")
	}
	defer func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() }()
	cl, err = kgo.NewClient(kgo.SeedBrokers(strings.Split(bootstrap, ",")...),
		kgo.ConsumeTopics("dev"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatal("the record produced before the restart was not read back")
		}
		if fs.NumRecords() > 0 {
			if v := string(fs.Records()[0].Value); v != "hello" {
				t.Fatalf("read %q", v)
			}
			return
		}
	}
}

// checkGroupAdmin: every broker's admin listener describes a group, the
// group's coordinator and the others alike.
func checkGroupAdmin(t *testing.T, ctx context.Context, adm *kadm.Client, adminBase int) {
	t.Helper()
	var offs kadm.Offsets
	offs.Add(kadm.Offset{Topic: "dev", Partition: 0, At: 1, LeaderEpoch: -1})
	if err := adm.CommitAllOffsets(ctx, "dev-group", offs); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		var body struct {
			Group      string `json:"group"`
			State      string `json:"state"`
			Partitions []struct {
				Topic     string `json:"topic"`
				Partition int32  `json:"partition"`
				Committed int64  `json:"committed"`
			} `json:"partitions"`
		}
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/api/groups/dev-group", adminBase+i))
		if err != nil {
			t.Fatal(err)
		}
		err = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK || body.Group != "dev-group" || body.State != "Empty" || len(body.Partitions) != 1 ||
			body.Partitions[0].Topic != "dev" || body.Partitions[0].Committed != 1 {
			t.Errorf("broker %d answers %s %+v, want dev-group, empty, committed 1 on dev-0", i, resp.Status, body)
		}
	}
}
