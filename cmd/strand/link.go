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
	cmd.AddCommand(linkCreateCommand(api), linkListCommand(api), linkStatusCommand(api),
		linkPauseCommand(api, true), linkPauseCommand(api, false), linkPromoteCommand(api, false),
		linkPromoteCommand(api, true), linkDeleteCommand(api))
	return cmd
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func linkCreateCommand(api func() *adminAPI) *cobra.Command {
	var (
		l                            cluster.Link
		brokers, topics, groups      []string
		excludeTopics, excludeGroups []string
		tlsOn                        bool
		ca, cert, key                string
		saslMech, saslUser, saslPass string
		interval, txnTimeout         time.Duration
	)
	cmd := &cobra.Command{
		Use:   "create NAME --source-brokers HOST:PORT[,...] --topics REGEX",
		Short: "Create a cluster link: mirror the matching topics of another Kafka cluster, offset for offset",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			l.Name = args[0]
			l.Source.BootstrapServers = brokers
			l.Topics = cluster.Filter{Include: topics, Exclude: excludeTopics}
			l.Groups = cluster.Filter{Include: groups, Exclude: excludeGroups}
			l.SyncGroupOffsets = l.SyncGroupOffsets || len(groups) > 0
			l.OffsetSyncIntervalMs = interval.Milliseconds()
			l.TransactionTimeoutMs = txnTimeout.Milliseconds()
			src := &l.Source
			for _, f := range []struct {
				path string
				into *string
				flag string
			}{{ca, &src.CACertPEM, "--source-tls-ca"}, {cert, &src.CertPEM, "--source-tls-cert"}, {key, &src.KeyPEM, "--source-tls-key"}} {
				if f.path == "" {
					continue
				}
				b, err := os.ReadFile(f.path)
				if err != nil {
					return fmt.Errorf("%s: %w", f.flag, err)
				}
				*f.into = string(b)
			}
			if cert != "" && key == "" {
				src.KeyPEM = src.CertPEM // the key in the certificate's file
			}
			tlsOn = tlsOn || ca != "" || cert != ""
			if saslPass == "" {
				saslPass = os.Getenv("STRAND_SOURCE_SASL_PASSWORD")
			}
			src.SASLMechanism, src.SASLUsername, src.SASLPassword = saslMech, saslUser, saslPass
			switch {
			case saslMech != "" && tlsOn:
				src.SecurityProtocol = "SASL_SSL"
			case saslMech != "":
				src.SecurityProtocol = "SASL_PLAINTEXT"
			case tlsOn:
				src.SecurityProtocol = "SSL"
			default:
				src.SecurityProtocol = "PLAINTEXT"
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
	f := cmd.Flags()
	f.StringSliceVar(&brokers, "source-brokers", nil, "the source cluster's bootstrap servers, host:port[,...]")
	f.StringArrayVar(&topics, "topics", nil, "mirror the source topics whose whole name matches this regular expression (repeatable)")
	f.StringArrayVar(&excludeTopics, "exclude-topics", nil, "but not those matching this one (repeatable)")
	f.StringArrayVar(&groups, "groups", nil, "copy the committed offsets of the groups matching this regular expression (repeatable)")
	f.StringArrayVar(&excludeGroups, "exclude-groups", nil, "but not of those matching this one (repeatable)")
	f.BoolVar(&l.SyncTopicConfigs, "sync-topic-configs", false, "copy the source topics' config overrides to their mirrors")
	f.Int64Var(&l.MaxBytesPerSec, "max-bytes-per-sec", 0, "cap what the link fetches from the source, per broker (0: no cap)")
	f.BoolVar(&l.ReverseOffsetSync, "reverse-offset-sync", false,
		"copy the groups' commits made here back to the source while they have no member there, so consumers can go back")
	f.DurationVar(&interval, "offset-sync-interval", 5*time.Second, "how often group offsets are copied")
	f.DurationVar(&txnTimeout, "transaction-timeout", time.Minute,
		"after a promotion or failover, abort the transactions the source left open once this has passed")
	f.BoolVar(&tlsOn, "source-tls", false, "connect to the source with TLS (implied by --source-tls-ca and --source-tls-cert)")
	f.StringVar(&ca, "source-tls-ca", "", "PEM file of the CAs to trust for the source (default: the system's)")
	f.StringVar(&cert, "source-tls-cert", "", "PEM file of a client certificate for the source, for mutual TLS")
	f.StringVar(&key, "source-tls-key", "", "PEM file of that certificate's key (default: in --source-tls-cert)")
	f.StringVar(&saslMech, "source-sasl-mechanism", "", "authenticate to the source with SASL: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")
	f.StringVar(&saslUser, "source-sasl-user", "", "the SASL user at the source")
	f.StringVar(&saslPass, "source-sasl-password", "", "the SASL password at the source (default: STRAND_SOURCE_SASL_PASSWORD)")
	cmd.MarkFlagRequired("source-brokers")
	cmd.MarkFlagRequired("topics")
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
			return tw.Flush()
		},
	}
	formatFlag(cmd, &format)
	return cmd
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
