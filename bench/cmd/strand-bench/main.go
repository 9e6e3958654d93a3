// Command strand-bench measures Kafka-protocol brokers: one workload
// against a running broker (run), or every workload against Strand, Apache
// Kafka and kfake side by side (suite; bench/run.sh fetches Kafka and runs
// it). It is not part of the strand binary.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

func main() {
	root := &cobra.Command{
		Use:           "strand-bench",
		Short:         "Measure Kafka-protocol brokers: one workload (run), or Strand against Kafka and kfake (suite)",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(runCommand(), suiteCommand(), mirrorCommand())
	if err := root.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "strand-bench:", err)
		os.Exit(1)
	}
}
