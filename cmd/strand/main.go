// Command strand is the Strand broker and its tools.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

func main() {
	if err := rootCommand().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "strand:", err)
		os.Exit(1)
	}
}

// rootCommand is strand with every command.
func rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "strand",
		Short:         "Strand: a durable commit log that speaks the Kafka protocol",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().StringVar(&profileName, "profile", "", "the profile (named cluster) the tools use (default: STRAND_PROFILE, else the current one)")
	root.AddCommand(serveCommand())
	root.AddCommand(devClusterCommand())
	root.AddCommand(clusterCommand())
	root.AddCommand(topicCommand())
	root.AddCommand(produceCommand())
	root.AddCommand(consumeCommand())
	root.AddCommand(groupCommand())
	root.AddCommand(migrateCommand())
	root.AddCommand(profileCommand())
	addExamples(root)
	return root
}
