package testutil

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// ReplicaBytes is a partition's stored batches in one broker's data
// directory: its segment files in order, concatenated, so that replicas
// that rolled at other points compare equal when they hold the same log.
func ReplicaBytes(t testing.TB, dataDir, topic string, partition int32) []byte {
	t.Helper()
	dir := filepath.Join(dataDir, fmt.Sprintf("%s-%d", topic, partition))
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".log") {
			b, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, b...)
		}
	}
	return out
}
