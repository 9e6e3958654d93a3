package server

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/strandlog/strand/internal/cluster"
	"github.com/strandlog/strand/internal/config"
	"github.com/strandlog/strand/internal/dirlock"
)

// lockDataDir creates the data directory if need be and takes its lock,
// then, for a member of a metadata quorum, the lock of the quorum's
// directory inside it (Kafka locks its metadata log directory too), before
// anything in them is read. The locks come back in the order taken.
func lockDataDir(cfg config.Broker) ([]*dirlock.Lock, error) {
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, err
	}
	data, err := LockDataDir(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	if voters, _ := cfg.Voters(); len(voters) == 0 { // Validate read them
		return []*dirlock.Lock{data}, nil
	}
	dir := filepath.Join(cfg.DataDir, cluster.MetadataDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, errors.Join(err, data.Release())
	}
	meta, err := dirlock.Acquire(dir)
	if err != nil {
		var held *dirlock.HeldError
		if errors.As(err, &held) {
			err = fmt.Errorf("metadata quorum directory %w", err)
		}
		return nil, errors.Join(err, data.Release())
	}
	return []*dirlock.Lock{data, meta}, nil
}

// LockDataDir takes a data directory's lock, as a broker holds it while it
// runs; the tools that write into a stopped broker's directory (strand user
// create) take it too, so they refuse while a broker runs there.
func LockDataDir(dir string) (*dirlock.Lock, error) {
	l, err := dirlock.Acquire(dir)
	var held *dirlock.HeldError
	if errors.As(err, &held) {
		return nil, fmt.Errorf("data directory %w", err)
	}
	return l, err
}
