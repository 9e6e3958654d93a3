package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// buildVersion is what the binary says it is, from the build information
// the Go toolchain writes into it: the module's version, the commit it was
// built from and whether the tree had uncommitted changes, and the Go
// version. The toolchain records the commit only when it builds in a git
// checkout with VCS stamping on (-buildvcs, not in a linked worktree);
// otherwise the commit is "unknown".
type buildVersion struct {
	Version  string `json:"version"`
	Commit   string `json:"commit"`
	Modified bool   `json:"modified"`
	Go       string `json:"go"`
	Platform string `json:"platform"`
}

func readBuildVersion(info *debug.BuildInfo, ok bool) buildVersion {
	v := buildVersion{Version: "devel", Commit: "unknown", Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if !ok {
		return v
	}
	if info.Main.Version != "" && info.Main.Version != "(devel)" {
		v.Version = info.Main.Version
	}
	if info.GoVersion != "" {
		v.Go = info.GoVersion
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Commit = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

// String is the version line after "strand version ".
func (v buildVersion) String() string {
	commit := "commit " + v.Commit
	if v.Modified {
		commit += " (modified)"
	}
	return fmt.Sprintf("%s, %s, %s %s", v.Version, commit, v.Go, v.Platform)
}

// currentVersion is this binary's version.
func currentVersion() buildVersion { return readBuildVersion(debug.ReadBuildInfo()) }

// versionTemplate is how strand --version and strand version print.
const versionTemplate = "strand version {{.Version}}\n"

func versionCommand() *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version, the commit it was built from and the Go version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			v := currentVersion()
			if format != "table" {
				return writeData(cmd.OutOrStdout(), format, v)
			}
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "strand version %s\n", v)
			return err
		},
	}
	formatFlag(cmd, &format)
	return cmd
}
