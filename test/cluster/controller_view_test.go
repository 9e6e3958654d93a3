package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/strandlog/strand/internal/testutil"
)

// brokerView is what one broker's tools say of the cluster: the
// controller and the brokers down with their partitions, as `strand
// cluster info` (JSON), `strand cluster health` (JSON), the console's
// overview and /api/health give them, and the info's table.
type brokerView struct {
	info, health, console, api int32
	infoDown, healthDown       map[int32][]string
	consoleDown, apiDown       map[int32][]string
	table                      string
}

// viewThrough asks everything of broker p.
func viewThrough(t *testing.T, p *testutil.Process) brokerView {
	t.Helper()
	cli := func(args ...string) []byte {
		t.Helper()
		cmd := exec.Command(testutil.Binary(t), append(args, "--brokers", p.Addr)...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		// cluster health exits non-zero when the cluster is not healthy.
		if _, exit := err.(*exec.ExitError); err != nil && !(exit && args[1] == "health" && len(out) > 0) {
			t.Fatalf("strand %s through %s: %v\n%s%s", strings.Join(args, " "), p.Addr, err, out, stderr.String())
		}
		return out
	}
	type broker struct {
		NodeID     int32    `json:"node_id"`
		Status     string   `json:"status"`
		Partitions []string `json:"partitions"`
	}
	var info struct {
		Controller int32    `json:"controller"`
		Brokers    []broker `json:"brokers"`
	}
	var health struct {
		Controller  int32    `json:"controller"`
		DownBrokers []broker `json:"down_brokers"`
	}
	var api struct {
		Controller  int32    `json:"controller"`
		DownBrokers []broker `json:"down_brokers"`
	}
	if err := json.Unmarshal(cli("cluster", "info", "--format", "json"), &info); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(cli("cluster", "health", "--format", "json"), &health); err != nil {
		t.Fatal(err)
	}
	v := brokerView{info: info.Controller, health: health.Controller, table: string(cli("cluster", "info")),
		infoDown: map[int32][]string{}, healthDown: map[int32][]string{}, apiDown: map[int32][]string{}}
	for _, b := range info.Brokers {
		if b.Status == "down" {
			v.infoDown[b.NodeID] = b.Partitions
		}
	}
	for _, b := range health.DownBrokers {
		v.healthDown[b.NodeID] = b.Partitions
	}
	getJSON(t, "http://"+p.Admin+"/api/health", &api)
	v.api = api.Controller
	for _, b := range api.DownBrokers {
		v.apiDown[b.NodeID] = b.Partitions
	}
	v.console, v.consoleDown = consoleOverview(t, "http://"+p.Admin+"/")
	return v
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}

var (
	consoleController = regexp.MustCompile(`id="controller">(-?\d+)<`)
	consoleDownRow    = regexp.MustCompile(`<tr><td class="bad">(\d+)</td><td class="partitions">([^<]*)</td></tr>`)
)

// consoleOverview reads the controller and the brokers down off the
// console's overview page.
func consoleOverview(t *testing.T, url string) (int32, map[int32][]string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	page, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %v\n%s", url, resp.Status, err, page)
	}
	m := consoleController.FindSubmatch(page)
	if m == nil {
		t.Fatalf("the console's overview names no controller:\n%s", page)
	}
	controller, _ := strconv.Atoi(string(m[1]))
	down := map[int32][]string{}
	for _, row := range consoleDownRow.FindAllSubmatch(page, -1) {
		id, _ := strconv.Atoi(string(row[1]))
		down[int32(id)] = strings.Split(string(row[2]), ", ")
	}
	return int32(controller), down
}

// checkViews asks each running broker three times over and wants every
// tool to name leader as controller and to list down (node ids to the
// partitions they hold) as the brokers down.
func checkViews(t *testing.T, c *testutil.ProcessCluster, leader int32, down map[int32][]string) {
	t.Helper()
	for round := range 3 {
		for i, p := range c.Procs {
			if _, isDown := down[int32(i)]; isDown {
				continue
			}
			v := viewThrough(t, p)
			if v.info != leader || v.health != leader || v.console != leader || v.api != leader {
				t.Fatalf("round %d through broker %d: cluster info names controller %d, cluster health %d, the console %d, "+
					"/api/health %d; the quorum's leader is %d", round, i, v.info, v.health, v.console, v.api, leader)
			}
			for what, got := range map[string]map[int32][]string{"cluster info": v.infoDown, "cluster health": v.healthDown,
				"the console": v.consoleDown, "/api/health": v.apiDown} {
				if !mapsOfSlicesEqual(got, down) {
					t.Fatalf("round %d through broker %d: %s lists brokers down %v, want %v", round, i, what, got, down)
				}
			}
			for id, parts := range down {
				line := fmt.Sprintf("broker %d is down, holding %d partitions: %s", id, len(parts), strings.Join(parts, ", "))
				if !strings.Contains(v.table, line) || !regexp.MustCompile(fmt.Sprintf(`(?m)^%d .* down `, id)).MatchString(v.table) {
					t.Fatalf("round %d through broker %d: cluster info's table does not list broker %d down (%q):\n%s",
						round, i, id, line, v.table)
				}
			}
		}
	}
}

func mapsOfSlicesEqual(a, b map[int32][]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || !slices.Equal(v, w) {
			return false
		}
	}
	return true
}

// TestEveryBrokerNamesTheQuorumLeader: through every broker, again and
// again, `strand cluster info` and `cluster health` (JSON), the console
// and /api/health name the same controller, the metadata quorum's leader.
// Once that leader is killed, they name its successor, list the killed
// broker as down with the partitions it holds (the info's table too), and
// the survivors log the leader change with node ids.
func TestEveryBrokerNamesTheQuorumLeader(t *testing.T) {
	if testing.Short() {
		t.Skip("processes and kill -9: not in -short")
	}
	c := testutil.StartProcessCluster(t, 3, "--broker-session-timeout", "3s")
	t.Cleanup(func() {
		if t.Failed() {
			for i, p := range c.Procs {
				t.Logf("broker %d output (last 40 lines):\n%s", i, p.Output.Tail(40))
			}
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	adm := kadm.NewClient(newClient(t, c.Seeds()))
	if _, err := adm.CreateTopic(ctx, 6, 2, nil, "spread"); err != nil {
		t.Fatal(err)
	}
	leader := controllerOf(t, c)
	checkViews(t, c, leader, nil)

	// What the leader holds, as the metadata places it.
	md, err := testutil.BrokerMetadata(c.Procs[leader].Addr)
	if err != nil {
		t.Fatal(err)
	}
	var held []string
	for _, topic := range md.Topics {
		for _, p := range topic.Partitions {
			if slices.Contains(p.Replicas, leader) {
				held = append(held, fmt.Sprintf("%s-%d", *topic.Topic, p.Partition))
			}
		}
	}
	slices.SortFunc(held, comparePartitionNames)
	logged := make([]int, len(c.Procs))
	for i, p := range c.Procs {
		logged[i] = len(p.Output.String())
	}
	c.Procs[leader].Kill()

	var next int32 = -1
	survivor := c.Procs[(leader+1)%3]
	testutil.Eventually(t, 30*time.Second, func() error {
		l, err := testutil.QuorumLeader(survivor.Addr)
		if err != nil || l < 0 || l == leader {
			return fmt.Errorf("the quorum's leader after %d's kill: %d %v", leader, l, err)
		}
		next = l
		md, err := testutil.BrokerMetadata(survivor.Addr)
		if err != nil || len(md.Brokers) != 2 {
			return fmt.Errorf("broker %d not fenced yet: %v %+v", leader, err, md)
		}
		return nil
	})
	checkViews(t, c, next, map[int32][]string{leader: held})

	// Every survivor logged the change, naming the new leader and itself
	// by node id.
	for i, p := range c.Procs {
		if int32(i) == leader {
			continue
		}
		var lines []string
		for line := range strings.SplitSeq(p.Output.String()[logged[i]:], "\n") {
			if strings.Contains(line, `msg="leader changed"`) {
				lines = append(lines, line)
			}
		}
		want := fmt.Sprintf("node_id=%d leader=%d ", i, next)
		if len(lines) == 0 || !strings.Contains(lines[len(lines)-1], want) {
			t.Errorf("broker %d's leader changes since the kill %q, want the last with %q", i, lines, want)
		}
	}
}

// comparePartitionNames orders "topic-partition" names by topic, then
// partition number.
func comparePartitionNames(a, b string) int {
	i, j := strings.LastIndexByte(a, '-'), strings.LastIndexByte(b, '-')
	if c := strings.Compare(a[:i], b[:j]); c != 0 {
		return c
	}
	pa, _ := strconv.Atoi(a[i+1:])
	pb, _ := strconv.Atoi(b[j+1:])
	return pa - pb
}
