package main

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.yaml.in/yaml/v3"
)

// A profile names a cluster, so that the tools reach it without --brokers
// (rpk's profiles). The tools take their brokers from --brokers, else
// STRAND_BROKERS, else the profile named by --profile (or STRAND_PROFILE,
// or the current one), else the local broker.

// profileName is the root's --profile flag.
var profileName string

// profileFile is the profiles file: YAML at STRAND_PROFILES, by default
// strand/profiles.yaml in the user's configuration directory.
type profileFile struct {
	Current  string             `yaml:"current,omitempty"`
	Profiles map[string]profile `yaml:"profiles"`
}

// profile is one named cluster: where it is and how to reach it.
type profile struct {
	Brokers        string `yaml:"brokers" json:"brokers"`
	clientSecurity `yaml:",inline"`
}

// profilesPath is where the profiles file is.
func profilesPath() (string, error) {
	if p := os.Getenv("STRAND_PROFILES"); p != "" {
		return p, nil
	}
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("no configuration directory for profiles (set STRAND_PROFILES): %w", err)
	}
	return filepath.Join(dir, "strand", "profiles.yaml"), nil
}

// readProfiles reads the profiles file; a missing one has no profiles.
func readProfiles() (profileFile, string, error) {
	pf := profileFile{Profiles: map[string]profile{}}
	path, err := profilesPath()
	if err != nil {
		return pf, "", err
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return pf, path, nil
	}
	if err != nil {
		return pf, path, err
	}
	if err := yaml.Unmarshal(b, &pf); err != nil {
		return pf, path, fmt.Errorf("%s: %w", path, err)
	}
	if pf.Profiles == nil {
		pf.Profiles = map[string]profile{}
	}
	return pf, path, nil
}

// write replaces the profiles file whole.
func (pf profileFile) write(path string) error {
	b, err := yaml.Marshal(pf)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// localBroker is where the tools go without any other word.
const localBroker = "127.0.0.1:9092"

// clientOpts are the tools' client options: the bootstrap brokers
// (seedBrokers) and the TLS and SASL settings of the flags, over those of
// the chosen profile. Tools get their clients through connect, which uses
// them.
func clientOpts(flag string) ([]kgo.Opt, []string, error) {
	c, err := clusterOpts(flag)
	return c.opts, c.seeds, err
}

// clusterConfig is how the tools reach a cluster: its bootstrap brokers,
// where they were named, and the client options (the brokers first).
type clusterConfig struct {
	seeds []string
	from  string // --brokers, STRAND_BROKERS, a profile, or the default
	opts  []kgo.Opt
}

func clusterOpts(flag string) (clusterConfig, error) {
	seeds, from, err := seedBrokersFrom(flag)
	if err != nil {
		return clusterConfig{}, err
	}
	var prof clientSecurity
	if p, ok, err := chosenProfile(); err != nil {
		return clusterConfig{}, err
	} else if ok {
		prof = p.clientSecurity
	}
	sec, err := security.merged(prof).opts()
	if err != nil {
		return clusterConfig{}, err
	}
	return clusterConfig{seeds: seeds, from: from, opts: append([]kgo.Opt{kgo.SeedBrokers(seeds...)}, sec...)}, nil
}

// chosenProfile is the profile --profile, STRAND_PROFILE or the current
// one names, if any.
func chosenProfile() (profile, bool, error) {
	name := profileName
	if name == "" {
		name = os.Getenv("STRAND_PROFILE")
	}
	pf, path, err := readProfiles()
	if err != nil {
		if name != "" {
			return profile{}, false, err
		}
		return profile{}, false, nil
	}
	if name == "" {
		name = pf.Current
	}
	if name == "" {
		return profile{}, false, nil
	}
	p, ok := pf.Profiles[name]
	if !ok {
		return profile{}, false, fmt.Errorf("no profile %q in %s", name, path)
	}
	return p, true, nil
}

// seedBrokers is the tools' bootstrap brokers: flag (--brokers) if given,
// else STRAND_BROKERS, else the chosen profile's, else the local broker.
func seedBrokers(flag string) ([]string, error) {
	seeds, _, err := seedBrokersFrom(flag)
	return seeds, err
}

// seedBrokersFrom is seedBrokers and where they were named.
func seedBrokersFrom(flag string) ([]string, string, error) {
	list, from := flag, "--brokers"
	if list == "" {
		list, from = os.Getenv("STRAND_BROKERS"), "STRAND_BROKERS"
	}
	if list == "" {
		p, ok, err := chosenProfile()
		if err != nil {
			return nil, "", err
		}
		if ok {
			list, from = p.Brokers, "the profile's brokers"
		}
	}
	if list == "" {
		list, from = localBroker, "the default; --brokers, STRAND_BROKERS or a profile names others"
	}
	var out []string
	for _, b := range strings.Split(list, ",") {
		if b = strings.TrimSpace(b); b != "" {
			out = append(out, b)
		}
	}
	if len(out) == 0 {
		return nil, "", fmt.Errorf("no brokers in %q (%s)", list, from)
	}
	return out, from, nil
}

func profileCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "profile", Short: "Named clusters, so that the tools reach them without --brokers",
		Long: `Profiles name clusters, as rpk's do. The tools take their brokers from --brokers,
else STRAND_BROKERS, else the profile --profile (or STRAND_PROFILE) names, else
the current profile, else 127.0.0.1:9092. Profiles are kept in STRAND_PROFILES,
by default strand/profiles.yaml in the user's configuration directory.`,
		Example: `  strand profile create prod --brokers kafka-1:9092,kafka-2:9092
  strand profile use prod
  strand topic list                 # on prod
  strand topic list --profile local`}
	cmd.AddCommand(profileCreateCommand(), profileUseCommand(), profileListCommand(), profileDeleteCommand())
	return cmd
}

func profileCreateCommand() *cobra.Command {
	var brokers string
	var use bool
	cmd := &cobra.Command{Use: "create NAME", Short: "Name a cluster (the first profile becomes the current one)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if brokers == "" {
				return errors.New("--brokers is required")
			}
			pf, path, err := readProfiles()
			if err != nil {
				return err
			}
			if _, ok := pf.Profiles[name]; ok {
				return fmt.Errorf("profile %q exists (strand profile delete %s first)", name, name)
			}
			pf.Profiles[name] = profile{Brokers: brokers, clientSecurity: security}
			if use || pf.Current == "" {
				pf.Current = name
			}
			if err := pf.write(path); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "created profile %s (%s)%s\n", name, brokers, currentMark(pf, name))
			return nil
		}}
	cmd.Flags().StringVar(&brokers, "brokers", "", "the cluster's bootstrap brokers, comma-separated (required)")
	cmd.Flags().BoolVar(&use, "use", false, "make it the current profile")
	// How to reach it, kept in the profile (a password too, in a file
	// only its owner reads).
	securityFlags(cmd.Flags())
	return cmd
}

// currentMark says that a profile is the current one.
func currentMark(pf profileFile, name string) string {
	if pf.Current == name {
		return ", the current profile"
	}
	return ""
}

func profileUseCommand() *cobra.Command {
	return &cobra.Command{Use: "use NAME", Short: "Make a profile the current one", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			pf, path, err := readProfiles()
			if err != nil {
				return err
			}
			if _, ok := pf.Profiles[args[0]]; !ok {
				return fmt.Errorf("no profile %q in %s", args[0], path)
			}
			pf.Current = args[0]
			if err := pf.write(path); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "using profile %s\n", args[0])
			return nil
		}}
}

// listedProfile is a profile as list prints it.
type listedProfile struct {
	Name    string `json:"name"`
	Brokers string `json:"brokers"`
	Current bool   `json:"current"`
}

func profileListCommand() *cobra.Command {
	var format string
	cmd := &cobra.Command{Use: "list", Short: "Every profile", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			pf, _, err := readProfiles()
			if err != nil {
				return err
			}
			out := []listedProfile{}
			for _, name := range slices.Sorted(maps.Keys(pf.Profiles)) {
				out = append(out, listedProfile{Name: name, Brokers: pf.Profiles[name].Brokers, Current: name == pf.Current})
			}
			w := cmd.OutOrStdout()
			if format != "table" {
				return writeData(w, format, map[string]any{"profiles": out})
			}
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "PROFILE\tBROKERS\tCURRENT")
			for _, p := range out {
				mark := ""
				if p.Current {
					mark = "*"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\n", p.Name, p.Brokers, mark)
			}
			return tw.Flush()
		}}
	formatFlag(cmd, &format)
	return cmd
}

func profileDeleteCommand() *cobra.Command {
	return &cobra.Command{Use: "delete NAME", Short: "Forget a profile", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			pf, path, err := readProfiles()
			if err != nil {
				return err
			}
			if _, ok := pf.Profiles[args[0]]; !ok {
				return fmt.Errorf("no profile %q in %s", args[0], path)
			}
			delete(pf.Profiles, args[0])
			if pf.Current == args[0] {
				pf.Current = ""
			}
			if err := pf.write(path); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "deleted profile %s\n", args[0])
			return nil
		}}
}
