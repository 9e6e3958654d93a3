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
		Version:       currentVersion().String(),
	}
	root.SetVersionTemplate(versionTemplate)
	root.SetFlagErrorFunc(flagError)
	root.AddCommand(serveCommand())
	root.AddCommand(devClusterCommand())
	root.AddCommand(clusterCommand())
	root.AddCommand(topicCommand())
	root.AddCommand(produceCommand())
	root.AddCommand(consumeCommand())
	root.AddCommand(groupCommand())
	root.AddCommand(migrateCommand())
	root.AddCommand(profileCommand())
	root.AddCommand(userCommand())
	root.AddCommand(aclCommand())
	root.AddCommand(linkCommand())
	root.AddCommand(metadataCommand())
	root.AddCommand(versionCommand())
	// The tools that talk to a cluster take a profile; the broker's own
	// commands do not.
	for _, c := range root.Commands() {
		switch c.Name() {
		case "serve", "dev-cluster", "profile", "user", "version", "completion", "help":
			continue
		}
		c.PersistentFlags().StringVar(&profileName, "profile", "", "the profile (named cluster) to use (default: STRAND_PROFILE, else the current one)")
		securityFlags(c.PersistentFlags())
	}
	addExamples(root)
	return root
}
