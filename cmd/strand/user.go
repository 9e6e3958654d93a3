package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/strandlog/strand/internal/cluster"
	"github.com/strandlog/strand/internal/scram"
	"github.com/strandlog/strand/internal/server"
)

// userCommand manages users' SCRAM credentials in a broker's data
// directory, while it is stopped: the first user of a SASL listener, as
// Kafka's kafka-storage format --add-scram makes it. Once a broker runs,
// kafka-configs.sh (AlterUserScramCredentials) changes them.
func userCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "user", Short: "Users' SCRAM credentials in a stopped broker's data directory"}
	var (
		mechanism, password, dataDir string
		iterations                   int32
	)
	create := &cobra.Command{Use: "create NAME", Short: "Set a user's SCRAM credential (a salt and derived keys, never the password)",
		Args: cobra.ExactArgs(1),
		Example: `  strand user create admin --mechanism SCRAM-SHA-512 --password "$ADMIN_PASSWORD" --data-dir ./strand-data
  strand serve --listeners SASL_PLAINTEXT://127.0.0.1:9092 --sasl-enabled-mechanisms SCRAM-SHA-512`,
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := scram.ParseMechanism(mechanism)
			if err != nil {
				return err
			}
			if password == "" {
				return errors.New("--password is required")
			}
			if iterations < scram.MinIterations || iterations > scram.MaxIterations {
				return fmt.Errorf("--iterations %d: %d to %d", iterations, scram.MinIterations, scram.MaxIterations)
			}
			if _, err := os.Stat(filepath.Join(dataDir, cluster.MetadataDir)); err == nil {
				return fmt.Errorf("%s is a cluster broker's: set users with kafka-configs.sh --alter --entity-type users on a running cluster", dataDir)
			}
			if err := os.MkdirAll(dataDir, 0o755); err != nil {
				return err
			}
			// The broker's own lock: a running broker would not see the
			// change, and would write its metadata over it.
			lock, err := server.LockDataDir(dataDir)
			if err != nil {
				return fmt.Errorf("%w: stop the broker first, or set users on it with kafka-configs.sh --alter --entity-type users", err)
			}
			defer lock.Release()
			store, err := cluster.OpenFile(dataDir, 0)
			if err != nil {
				return err
			}
			defer store.Close()
			cred, err := m.NewCredential(password, iterations)
			if err != nil {
				return err
			}
			if err := store.AlterScramCredentials([]cluster.ScramCredentialChange{{User: args[0], Mechanism: int8(m),
				Credential: cluster.ScramCredential(cred)}}, nil); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "set %s's %s credential in %s\n", args[0], m, dataDir)
			return nil
		}}
	f := create.Flags()
	f.StringVar(&mechanism, "mechanism", "SCRAM-SHA-512", "SCRAM-SHA-256 or SCRAM-SHA-512")
	f.StringVar(&password, "password", "", "the user's password (required)")
	f.Int32Var(&iterations, "iterations", 4096, "SCRAM iterations, 4096 to 16384")
	f.StringVar(&dataDir, "data-dir", "strand-data", "the stopped broker's data directory")
	cmd.AddCommand(create)
	return cmd
}
