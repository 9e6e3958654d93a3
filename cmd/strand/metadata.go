package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/strandlog/strand/internal/cluster"
	"github.com/strandlog/strand/internal/config"
	"github.com/strandlog/strand/internal/dirlock"
	"github.com/strandlog/strand/internal/server"
)

// metadataCommand backs up and restores a cluster's metadata: its topics
// (with their ids, partitions and replicas), configs, users, ACLs, quotas
// and links, as the metadata quorum's log holds them.
func metadataCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "metadata",
		Short: "Back up and restore a cluster's metadata (topics, configs, users, ACLs, quotas, links)",
	}
	cmd.AddCommand(metadataBackupCommand(), metadataRestoreCommand())
	return cmd
}

func metadataBackupCommand() *cobra.Command {
	var dataDir, out string
	cmd := &cobra.Command{
		Use:   "backup",
		Short: "Write the metadata a voter's data directory holds to a file",
		Long: `Read the metadata quorum's log in a voter's data directory (its snapshot and
the committed changes after it) and write the cluster's metadata as it stood
at the last of them to --out: topics with their ids, partitions, replicas and
configs, broker and group configs, users, ACLs, quotas and cluster links. Every
voter holds the whole metadata, so one is enough. Give it a copy of the
directory (cp -a, or a filesystem snapshot), or the directory of a stopped
broker: reading recovers the log as a start would, which may cut a torn tail.
The records themselves are not in it: they stay in each broker's data
directory.`,
		Example: "  cp -a /var/lib/strand /tmp/strand-copy && strand metadata backup --data-dir /tmp/strand-copy --out metadata.json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Reading recovers the log, which may cut its tail: never
			// under a running broker (its lock is held), only a copy
			// (which has no holder) or a stopped broker's.
			lock, err := dirlock.Acquire(filepath.Join(dataDir, cluster.MetadataDir))
			if err != nil {
				return fmt.Errorf("%w: copy the directory and back up the copy", err)
			}
			defer lock.Release()
			b, err := cluster.ReadBackup(dataDir)
			if err != nil {
				return err
			}
			data, err := json.MarshalIndent(b, "", "  ")
			if err != nil {
				return err
			}
			if err := os.WriteFile(out, append(data, '\n'), 0o600); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "cluster %s: metadata at index %d written to %s\n", b.ClusterID, b.Index, out)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&dataDir, "data-dir", "", "a voter's data directory, or a copy of it (required)")
	f.StringVar(&out, "out", "", "the file to write (required); it holds users' salted credentials: keep it as secret as the brokers' disks")
	_ = cmd.MarkFlagRequired("data-dir")
	_ = cmd.MarkFlagRequired("out")
	return cmd
}

func metadataRestoreCommand() *cobra.Command {
	var from string
	var o serveOptions
	cfg := config.Defaults()
	cmd := &cobra.Command{
		Use:   "restore",
		Short: "Seed a voter's empty metadata log with a backup, when every voter's log was lost",
		Long: `When every voter of the metadata quorum lost its metadata log, restore the
cluster from a backup (strand metadata backup): run this on each voter, with the
settings it is started with (--config, or the same flags as serve), before
starting it. Each voter's log is seeded with the backup's metadata, for the
voters its settings name; all of them must get the same backup. The log must
not exist: it refuses to write over one. Started, the voters elect a leader and
the brokers serve the topics their data directories hold, under the ids the
backup keeps. Changes made after the backup was taken are lost.`,
		Example: "  strand metadata restore --config /etc/strand/strand.properties --from metadata.json   # on each voter, then start it",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if _, err := o.settings(cmd.Flags(), &cfg); err != nil {
				return err
			}
			voters, err := cfg.Voters()
			if err != nil {
				return err
			}
			if len(voters) == 0 {
				return fmt.Errorf("no controller.quorum.voters: a single node keeps its metadata in %s, which a copy restores",
					filepath.Join(cfg.DataDir, "cluster-metadata.json"))
			}
			if _, ok := voters[cfg.NodeID]; !ok {
				return fmt.Errorf("node %d is not a voter (%s): only voters are restored; brokers learn the metadata from them",
					cfg.NodeID, cfg.QuorumVoters)
			}
			data, err := os.ReadFile(from)
			if err != nil {
				return err
			}
			var b cluster.Backup
			if err := json.Unmarshal(data, &b); err != nil {
				return fmt.Errorf("%s: %w", from, err)
			}
			if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
				return err
			}
			lock, err := server.LockDataDir(cfg.DataDir) // the broker must not run
			if err != nil {
				return err
			}
			defer lock.Release()
			if err := b.Restore(cfg.DataDir, voters); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "node %d: metadata of cluster %s at index %d restored in %s, for voters %s\n",
				cfg.NodeID, b.ClusterID, b.Index, cfg.DataDir, cfg.QuorumVoters)
			return nil
		},
	}
	f := cmd.Flags()
	bindServeFlags(f, &cfg, &o) // the voter's settings, as serve reads them
	f.StringVar(&from, "from", "", "the backup (required)")
	_ = cmd.MarkFlagRequired("from")
	return cmd
}
