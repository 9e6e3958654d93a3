// Command strand is the Strand broker and its tools.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

func main() {
	root := &cobra.Command{
		Use:           "strand",
		Short:         "Strand: a durable commit log that speaks the Kafka protocol",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(serveCommand())
	root.AddCommand(devClusterCommand())
	root.AddCommand(clusterCommand())
	root.AddCommand(topicCommand())
	root.AddCommand(produceCommand())
	root.AddCommand(consumeCommand())
	root.AddCommand(groupCommand())
	root.AddCommand(migrateCommand())
	if err := root.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "strand:", err)
		os.Exit(1)
	}
}
