package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/strandlog/strand/internal/cluster"
	"github.com/strandlog/strand/internal/link"
)

// linkCommand manages cluster links through the admin API of any broker
// of the cluster (its admin listener, --admin): links are Strand's own, so
// there is no Kafka request for them.
func linkCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "link", Short: "Mirror another Kafka cluster: create, watch, promote and delete cluster links"}
	admin := cmd.PersistentFlags().String("admin", envOr("STRAND_ADMIN", "127.0.0.1:9644"),
		"a broker's admin listener, host:port (or STRAND_ADMIN)")
	api := func() *adminAPI { return &adminAPI{base: "http://" + *admin} }
	cmd.AddCommand(linkCreateCommand(api), linkAlterCommand(api), linkListCommand(api), linkStatusCommand(api),
		linkPauseCommand(api, true), linkPauseCommand(api, false), linkPromoteCommand(api, false),
		linkPromoteCommand(api, true), linkPromoteGroupCommand(api), linkDeleteCommand(api))
	return cmd
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// linkSettings are the flags that make a link's settings, for create and
// alter.
type linkSettings struct {
	l                            cluster.Link
	brokers, topics, groups      []string
	excludeTopics, excludeGroups []string
	tlsOn                        bool
	ca, cert, key                string
	saslMech, saslUser, saslPass string
	interval, txnTimeout         time.Duration
}

func (s *linkSettings) bind(f *pflag.FlagSet) {
	f.StringSliceVar(&s.brokers, "source-brokers", nil, "the source cluster's bootstrap servers, host:port[,...]")
	f.StringArrayVar(&s.topics, "topics", nil, "mirror the source topics whose whole name matches this regular expression (repeatable)")
	f.StringArrayVar(&s.excludeTopics, "exclude-topics", nil, "but not those matching this one (repeatable)")
	f.StringArrayVar(&s.groups, "groups", nil, "copy the committed offsets of the groups matching this regular expression (repeatable)")
	f.StringArrayVar(&s.excludeGroups, "exclude-groups", nil, "but not of those matching this one (repeatable)")
	f.BoolVar(&s.l.SyncTopicConfigs, "sync-topic-configs", false, "copy the source topics' config overrides to their mirrors")
	f.BoolVar(&s.l.SyncACLs, "sync-acls", false, "copy the source's ACLs of the mirror topics and of the groups --groups matches")
	f.Int64Var(&s.l.MaxBytesPerSec, "max-bytes-per-sec", 0, "cap what the link fetches from the source, per broker (0: no cap)")
	f.BoolVar(&s.l.ReverseOffsetSync, "reverse-offset-sync", false,
		"copy the groups' commits made here back to the source while they have no member there, so consumers can go back")
	f.BoolVar(&s.l.GroupPassThrough, "group-pass-through", false,
		"the groups --groups matches stay on the source while their consumers move: members connected here join the source's group")
	f.BoolVar(&s.l.AutoPromoteGroups, "auto-promote-groups", false,
		"with --group-pass-through: move a group home by itself once none of its members is left on the source")
	f.DurationVar(&s.interval, "offset-sync-interval", 5*time.Second, "how often group offsets are copied")
	f.DurationVar(&s.txnTimeout, "transaction-timeout", time.Minute,
		"after a promotion or failover, abort the transactions the source left open once this has passed")
	f.BoolVar(&s.tlsOn, "source-tls", false, "connect to the source with TLS (implied by --source-tls-ca and --source-tls-cert)")
	f.StringVar(&s.ca, "source-tls-ca", "", "PEM file of the CAs to trust for the source (default: the system's)")
	f.StringVar(&s.cert, "source-tls-cert", "", "PEM file of a client certificate for the source, for mutual TLS")
	f.StringVar(&s.key, "source-tls-key", "", "PEM file of that certificate's key (default: in --source-tls-cert)")
	f.StringVar(&s.saslMech, "source-sasl-mechanism", "", "authenticate to the source with SASL: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")
	f.StringVar(&s.saslUser, "source-sasl-user", "", "the SASL user at the source")
	f.StringVar(&s.saslPass, "source-sasl-password", "", "the SASL password at the source (default: STRAND_SOURCE_SASL_PASSWORD)")
}

// link makes the link the flags describe.
func (s *linkSettings) link(name string) (cluster.Link, error) {
	l := s.l
	l.Name = name
	l.Source.BootstrapServers = s.brokers
	l.Topics = cluster.Filter{Include: s.topics, Exclude: s.excludeTopics}
	l.Groups = cluster.Filter{Include: s.groups, Exclude: s.excludeGroups}
	l.SyncGroupOffsets = len(s.groups) > 0
	l.OffsetSyncIntervalMs = s.interval.Milliseconds()
	l.TransactionTimeoutMs = s.txnTimeout.Milliseconds()
	src := &l.Source
	for _, f := range []struct {
		path string
		into *string
		flag string
	}{{s.ca, &src.CACertPEM, "--source-tls-ca"}, {s.cert, &src.CertPEM, "--source-tls-cert"}, {s.key, &src.KeyPEM, "--source-tls-key"}} {
		if f.path == "" {
			continue
		}
		b, err := os.ReadFile(f.path)
		if err != nil {
			return l, fmt.Errorf("%s: %w", f.flag, err)
		}
		*f.into = string(b)
	}
	if s.cert != "" && s.key == "" {
		src.KeyPEM = src.CertPEM // the key in the certificate's file
	}
	tlsOn := s.tlsOn || s.ca != "" || s.cert != ""
	pass := s.saslPass
	if pass == "" {
		pass = os.Getenv("STRAND_SOURCE_SASL_PASSWORD")
	}
	src.SASLMechanism, src.SASLUsername, src.SASLPassword = s.saslMech, s.saslUser, pass
	switch {
	case s.saslMech != "" && tlsOn:
		src.SecurityProtocol = "SASL_SSL"
	case s.saslMech != "":
		src.SecurityProtocol = "SASL_PLAINTEXT"
	case tlsOn:
		src.SecurityProtocol = "SSL"
	default:
		src.SecurityProtocol = "PLAINTEXT"
	}
	return l, nil
}

// linkFlagFields are the JSON fields of a link each flag sets.
var linkFlagFields = map[string][]string{
	"source-brokers":       {"source.bootstrap_servers"},
	"topics":               {"topics.include"},
	"exclude-topics":       {"topics.exclude"},
	"groups":               {"groups.include", "sync_group_offsets"},
	"exclude-groups":       {"groups.exclude"},
	"sync-topic-configs":   {"sync_topic_configs"},
	"sync-acls":            {"sync_acls"},
	"max-bytes-per-sec":    {"max_bytes_per_sec"},
	"reverse-offset-sync":  {"reverse_offset_sync"},
	"group-pass-through":   {"group_pass_through"},
	"auto-promote-groups":  {"auto_promote_groups"},
	"offset-sync-interval": {"offset_sync_interval_ms"},
	"transaction-timeout":  {"transaction_timeout_ms"},
}

// sourceSecurityFlags change the source's security settings as a whole.
var sourceSecurityFlags = []string{"source-tls", "source-tls-ca", "source-tls-cert", "source-tls-key",
	"source-sasl-mechanism", "source-sasl-user", "source-sasl-password"}

// patch is what alter sends: the fields of the flags given, nothing else.
func (s *linkSettings) patch(cmd *cobra.Command, name string) (map[string]any, error) {
	l, err := s.link(name)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(l)
	if err != nil {
		return nil, err
	}
	var full map[string]any
	if err := json.Unmarshal(b, &full); err != nil {
		return nil, err
	}
	patch := map[string]any{}
	set := func(path string) {
		top, sub, nested := strings.Cut(path, ".")
		if !nested {
			patch[top] = full[top]
			return
		}
		m, _ := patch[top].(map[string]any)
		if m == nil {
			m = map[string]any{}
			patch[top] = m
		}
		if src, _ := full[top].(map[string]any); src != nil {
			m[sub] = src[sub]
		}
		if m[sub] == nil {
			m[sub] = []string{} // cleared
		}
	}
	for flag, paths := range linkFlagFields {
		if cmd.Flags().Changed(flag) {
			for _, p := range paths {
				set(p)
			}
		}
	}
	for _, flag := range sourceSecurityFlags {
		if cmd.Flags().Changed(flag) {
			for _, f := range []string{"security_protocol", "ca_cert_pem", "cert_pem", "key_pem", "sasl_mechanism", "sasl_username", "sasl_password"} {
				m, _ := patch["source"].(map[string]any)
				if m == nil {
					m = map[string]any{}
					patch["source"] = m
				}
				src, _ := full["source"].(map[string]any)
				v, ok := src[f]
				if !ok {
					v = ""
				}
				m[f] = v
			}
			break
		}
	}
	if len(patch) == 0 {
		return nil, errors.New("nothing to change: give the flags of the settings to change")
	}
	return patch, nil
}

func linkCreateCommand(api func() *adminAPI) *cobra.Command {
	var s linkSettings
	cmd := &cobra.Command{
		Use:   "create NAME --source-brokers HOST:PORT[,...] --topics REGEX",
		Short: "Create a cluster link: mirror the matching topics of another Kafka cluster, offset for offset",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			l, err := s.link(args[0])
			if err != nil {
				return err
			}
			var out cluster.Link
			if err := api().do(cmd.Context(), http.MethodPost, "/api/links", l, &out); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "created link %s: mirroring topics matching %s from %s\n", out.Name,
				strings.Join(out.Topics.Include, ", "), strings.Join(out.Source.BootstrapServers, ","))
			return nil
		},
	}
	s.bind(cmd.Flags())
	cmd.MarkFlagRequired("source-brokers")
	cmd.MarkFlagRequired("topics")
	return cmd
}

func linkAlterCommand(api func() *adminAPI) *cobra.Command {
	var s linkSettings
	cmd := &cobra.Command{
		Use:   "alter NAME [--topics REGEX] [--groups REGEX] [...]",
		Short: "Change a link's settings: only those whose flags are given (the source's secrets stay unless given)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			patch, err := s.patch(cmd, args[0])
			if err != nil {
				return err
			}
			var out cluster.Link
			if err := api().do(cmd.Context(), http.MethodPatch, "/api/links/"+url.PathEscape(args[0]), patch, &out); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "altered link %s: mirroring topics matching %s from %s\n", out.Name,
				strings.Join(out.Topics.Include, ", "), strings.Join(out.Source.BootstrapServers, ","))
			return nil
		},
	}
	s.bind(cmd.Flags())
	return cmd
}

func linkListCommand(api func() *adminAPI) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the cluster links",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			var out struct {
				Links []cluster.Link `json:"links"`
			}
			if err := api().do(cmd.Context(), http.MethodGet, "/api/links", nil, &out); err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if format != "table" {
				return writeData(w, format, out)
			}
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "LINK\tSTATE\tSOURCE\tTOPICS\tGROUPS")
			for _, l := range out.Links {
				state := "active"
				if l.Paused {
					state = "paused"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", l.Name, state, strings.Join(l.Source.BootstrapServers, ","),
					strings.Join(l.Topics.Include, ","), strings.Join(l.Groups.Include, ","))
			}
			return tw.Flush()
		},
	}
	formatFlag(cmd, &format)
	return cmd
}

func linkStatusCommand(api func() *adminAPI) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "status NAME",
		Short: "Show a link and, per mirror partition, the source's end, the mirror's end and the lag",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			var st link.Status
			if err := api().do(cmd.Context(), http.MethodGet, "/api/links/"+url.PathEscape(args[0]), nil, &st); err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if format != "table" {
				return writeData(w, format, st)
			}
			fmt.Fprintf(w, "link %s: %s, source %s\n", st.Name, st.State, strings.Join(st.Link.Source.BootstrapServers, ","))
			if st.Error != "" {
				fmt.Fprintf(w, "error: %s\n", st.Error)
			}
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "TOPIC\tPARTITION\tSTATE\tSOURCE-END\tMIRROR-END\tLAG\tLAG-SECONDS\tNOTE")
			for _, t := range st.Topics {
				for _, p := range t.Partitions {
					note := t.Reason
					if p.Stopped != "" {
						note = p.Stopped
					} else if p.Error != "" {
						note = p.Error
					}
					secs := "-"
					if p.LagSeconds >= 0 {
						secs = fmt.Sprintf("%.1f", p.LagSeconds)
					}
					fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\t%d\t%s\t%s\n", t.Topic, p.Partition, t.State, p.SourceEnd, p.MirrorEnd,
						p.LagRecords, secs, note)
				}
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			return printPassedThrough(w, st)
		},
	}
	formatFlag(cmd, &format)
	return cmd
}

// printPassedThrough lists the members of passed-through groups connected
// to the broker that answered, members of their groups at the source.
func printPassedThrough(w io.Writer, st link.Status) error {
	if st.PassThroughError != "" {
		fmt.Fprintf(w, "\nthe source's coordinator could not be reached for a passed-through group: %s\n", st.PassThroughError)
	}
	if len(st.PassedThrough) == 0 {
		return nil
	}
	fmt.Fprintf(w, "\n%d members of passed-through groups connected here (in the source's groups)\n", len(st.PassedThrough))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tCLIENT ID\tHOST\tSOFTWARE\tPARTITIONS\tNOTE")
	for _, m := range st.PassedThrough {
		sw := strings.TrimSpace(m.SoftwareName + " " + m.SoftwareVersion)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", m.Group, m.ClientID, m.Host, orDash(sw), orDash(strings.Join(m.Partitions, " ")),
			orDash(m.Held))
	}
	return tw.Flush()
}

func linkPauseCommand(api func() *adminAPI, pause bool) *cobra.Command {
	use, short := "resume NAME", "Resume a paused link"
	if pause {
		use, short = "pause NAME", "Pause a link: its mirrors stay, read-only, and stop following the source"
	}
	return &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			action := strings.Fields(use)[0]
			if err := api().do(cmd.Context(), http.MethodPost, "/api/links/"+url.PathEscape(args[0])+"/"+action, nil, nil); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "link %s %sd\n", args[0], action)
			return nil
		},
	}
}

func linkPromoteCommand(api func() *adminAPI, failover bool) *cobra.Command {
	var (
		topics  []string
		timeout time.Duration
		format  string
	)
	use, short := "promote NAME", "Make mirror topics writable once they hold everything the source has committed (planned cut-over)"
	if failover {
		use, short = "failover NAME", "Make mirror topics writable now, without the source, and report what may be missing"
	}
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			body := map[string]any{"topics": topics, "timeout_ms": timeout.Milliseconds()}
			var rep link.PromoteReport
			action := strings.Fields(use)[0]
			if err := api().do(cmd.Context(), http.MethodPost, "/api/links/"+url.PathEscape(args[0])+"/"+action, body, &rep); err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if format != "table" {
				return writeData(w, format, rep)
			}
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "TOPIC\tPARTITION\tSOURCE-END\tMIRROR-END\tMAY-BE-MISSING")
			for _, t := range rep.Topics {
				for _, p := range t.Partitions {
					fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\n", t.Topic, p.Partition, p.SourceEnd, p.MirrorEnd, p.LagRecords)
				}
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			fmt.Fprintf(w, "%d topics %sd: writable now\n", len(rep.Topics), action)
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&topics, "topic", nil, "a mirror topic to promote (repeatable; default all of the link's)")
	if !failover {
		cmd.Flags().DurationVar(&timeout, "timeout", time.Minute, "how long to wait for the mirrors to catch up")
	}
	formatFlag(cmd, &format)
	return cmd
}

func linkPromoteGroupCommand(api func() *adminAPI) *cobra.Command {
	var (
		group  string
		format string
	)
	cmd := &cobra.Command{
		Use:   "promote-group NAME --group GROUP",
		Short: "Make Strand the coordinator of a group the link passes through, once none of its members is left on the source",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			if group == "" {
				return errors.New("--group is required")
			}
			var rep link.GroupPromotion
			if err := api().do(cmd.Context(), http.MethodPost, "/api/links/"+url.PathEscape(args[0])+"/promote-group",
				map[string]any{"group": group}, &rep); err != nil {
				return err
			}
			if format != "table" {
				return writeData(cmd.OutOrStdout(), format, rep)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "group %s moved home from link %s: %d members rejoin here, %d partitions' commits copied last\n",
				rep.Group, rep.Link, rep.Members, rep.Committed)
			return nil
		},
	}
	cmd.Flags().StringVar(&group, "group", "", "the group to promote")
	formatFlag(cmd, &format)
	return cmd
}

func linkDeleteCommand(api func() *adminAPI) *cobra.Command {
	return &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a link that mirrors no topic any more (promote, fail over or delete its mirrors first)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := api().do(cmd.Context(), http.MethodDelete, "/api/links/"+url.PathEscape(args[0]), nil, nil); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "deleted link %s\n", args[0])
			return nil
		},
	}
}

// adminAPI calls a broker's admin listener.
type adminAPI struct{ base string }

// do sends a JSON request and decodes the answer into out; an answer that
// is not a success is returned as an error with the broker's message.
func (a *adminAPI) do(ctx context.Context, method, path string, in, out any) error {
	if ctx == nil {
		ctx = context.Background()
	}
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: 10 * time.Minute}).Do(req)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			return fmt.Errorf("the admin listener at %s does not answer (set --admin or STRAND_ADMIN to a broker's admin listener): %v",
				strings.TrimPrefix(a.base, "http://"), uerr.Err)
		}
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode >= 300 {
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(data, &e) == nil && e.Error != "" {
			return errors.New(e.Error)
		}
		return fmt.Errorf("%s %s: %s", method, path, resp.Status)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(data, out)
}
