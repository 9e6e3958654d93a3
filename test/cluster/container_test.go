package cluster

import (
	"context"
	"debug/elf"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandlog/strand/internal/testutil"
)

// TestContainerImage builds the container image as `make image` does
// (the binary built without cgo, deploy/container/Containerfile built by
// buildah, in storage of the test's own) and runs what it holds: the
// image's entrypoint, in the image's filesystem alone (a chroot: there
// is no container runtime here), with the image's command but for
// loopback ports. The binary is static and serves writes and reads.
func TestContainerImage(t *testing.T) {
	if testing.Short() {
		t.Skip("an image build: not in -short")
	}
	buildah, err := exec.LookPath("buildah")
	if err != nil {
		testutil.Missing(t, "buildah (apt-get install buildah), to build the container image")
	}
	testutil.NeedRoot(t, "building and entering an image")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	root := filepath.Join("..", "..")
	work := t.TempDir()
	context_ := filepath.Join(work, "context")
	if err := os.MkdirAll(context_, 0o755); err != nil {
		t.Fatal(err)
	}
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", filepath.Join(context_, "strand"), "./cmd/strand")
	build.Dir, build.Env = root, append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	storage := []string{"--storage-driver", "vfs", "--root", filepath.Join(work, "storage"), "--runroot", filepath.Join(work, "run")}
	bah := func(args ...string) string {
		t.Helper()
		out, err := exec.CommandContext(ctx, buildah, append(storage, args...)...).Output()
		if err != nil {
			var stderr []byte
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = ee.Stderr
			}
			t.Fatalf("buildah %s: %v\n%s", strings.Join(args, " "), err, stderr)
		}
		return strings.TrimSpace(string(out))
	}
	containerfile, err := filepath.Abs(filepath.Join(root, "deploy", "container", "Containerfile"))
	if err != nil {
		t.Fatal(err)
	}
	bah("bud", "--quiet", "-t", "strand:test", "-f", containerfile, context_)
	var config struct {
		OCIv1 struct {
			Config struct {
				Entrypoint, Cmd []string
				Volumes         map[string]struct{}
			} `json:"config"`
		}
	}
	if err := json.Unmarshal([]byte(bah("inspect", "--type", "image", "strand:test")), &config); err != nil {
		t.Fatal(err)
	}
	cfg := config.OCIv1.Config
	if len(cfg.Entrypoint) != 1 || len(cfg.Cmd) == 0 || cfg.Cmd[0] != "serve" {
		t.Fatalf("the image runs %v %v", cfg.Entrypoint, cfg.Cmd)
	}
	ctr := bah("from", "strand:test")
	t.Cleanup(func() { exec.Command(buildah, append(storage, "rm", ctr)...).Run() })
	mnt := bah("mount", ctr)
	t.Cleanup(func() { exec.Command(buildah, append(storage, "umount", ctr)...).Run() })

	// The image holds the binary and nothing it would need beside it.
	bin := filepath.Join(mnt, cfg.Entrypoint[0])
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatalf("the entrypoint %s: %v", cfg.Entrypoint[0], err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("the entrypoint is linked dynamically: the empty image has no loader for it")
		}
	}
	f.Close()
	entries, err := os.ReadDir(mnt)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	t.Logf("the image holds %v", names)

	// The image's command, on loopback ports, in the image's filesystem.
	addr, admin := testutil.FreePort(t), testutil.FreePort(t)
	args := make([]string, len(cfg.Cmd))
	for i, a := range cfg.Cmd {
		args[i] = strings.NewReplacer("0.0.0.0:9092", addr, "0.0.0.0:9644", admin).Replace(a)
	}
	for v := range cfg.Volumes {
		if err := os.MkdirAll(filepath.Join(mnt, v), 0o755); err != nil { // the runtime mounts the volume there
			t.Fatal(err)
		}
	}
	out := &testutil.SyncBuffer{}
	cmd := exec.Command(cfg.Entrypoint[0], args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: mnt, Pdeathsig: syscall.SIGKILL}
	cmd.Dir, cmd.Stdout, cmd.Stderr = "/", out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("in-a-container"), kgo.AllowAutoTopicCreation(),
		kgo.ConsumeTopics("in-a-container"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := range 10 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "r%d", i)}).FirstErr(); err != nil {
			t.Fatalf("produce to the broker from the image: %v\n%s", err, out)
		}
	}
	for read := 0; read < 10; {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read back %d of 10 records", read)
		}
		read += fs.NumRecords()
	}
	// Its data went to the volume, and it stops cleanly on SIGTERM, as a
	// container runtime stops it.
	if des, err := os.ReadDir(filepath.Join(mnt, "var", "lib", "strand")); err != nil || len(des) == 0 {
		t.Errorf("nothing written to the volume: %v", err)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-done:
		done <- err
		if err != nil {
			t.Errorf("the broker did not stop cleanly on SIGTERM: %v\n%s", err, out)
		}
	case <-ctx.Done():
		t.Fatal("the broker did not stop on SIGTERM")
	}
}
