package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// aclCommand manages ACLs over the Kafka protocol (CreateAcls, DescribeAcls,
// DeleteAcls), as kafka-acls.sh does, against any Kafka cluster with an
// authorizer.
func aclCommand() *cobra.Command {
	cmd, admin := adminCommand("acl", "Create, list and delete ACLs")
	cmd.AddCommand(aclCreateCommand(admin), aclListCommand(admin), aclDeleteCommand(admin))
	return cmd
}

// aclFlags names the ACLs a command works on.
type aclFlags struct {
	allow, deny                   []string
	hosts                         []string
	operations                    []string
	topic, group, transactionalID string
	cluster, prefixed             bool
}

func (a *aclFlags) bind(cmd *cobra.Command, filter bool) {
	f := cmd.Flags()
	verb := "to allow"
	if filter {
		verb = "whose allows to match (none: any)"
	}
	f.StringArrayVar(&a.allow, "allow", nil, "principal "+verb+", User:name (repeatable)")
	f.StringArrayVar(&a.deny, "deny", nil, "principal to deny, User:name (repeatable)")
	f.StringArrayVar(&a.hosts, "host", nil, "host the entries apply to (repeatable; default every host, *)")
	f.StringArrayVar(&a.operations, "operation", nil, "operation: read, write, create, delete, alter, describe, cluster-action, "+
		"describe-configs, alter-configs, idempotent-write, all (repeatable)")
	f.StringVar(&a.topic, "topic", "", "the topic (or, with --prefixed, the topics whose names start so)")
	f.StringVar(&a.group, "group", "", "the consumer group (or prefix)")
	f.StringVar(&a.transactionalID, "transactional-id", "", "the transactional id (or prefix)")
	f.BoolVar(&a.cluster, "cluster", false, "the cluster itself")
	f.BoolVar(&a.prefixed, "prefixed", false, "the name is a prefix")
}

// builder turns the flags into kadm's ACL builder; a filter may leave the
// resource, the principals and the operations out.
func (a *aclFlags) builder(filter bool) (*kadm.ACLBuilder, error) {
	b := kadm.NewACLs()
	resources := 0
	for _, set := range []bool{a.topic != "", a.group != "", a.transactionalID != "", a.cluster} {
		if set {
			resources++
		}
	}
	switch {
	case resources > 1:
		return nil, errors.New("one resource: --topic, --group, --transactional-id or --cluster")
	case resources == 0 && !filter:
		return nil, errors.New("a resource: --topic, --group, --transactional-id or --cluster")
	case a.topic != "":
		b.Topics(a.topic)
	case a.group != "":
		b.Groups(a.group)
	case a.transactionalID != "":
		b.TransactionalIDs(a.transactionalID)
	case a.cluster:
		b.Clusters()
	default:
		b.AnyResource()
	}
	switch {
	case a.prefixed:
		b.ResourcePatternType(kadm.ACLPatternPrefixed)
	case filter && resources == 0:
		b.ResourcePatternType(kadm.ACLPatternAny)
	}
	if !filter && len(a.allow)+len(a.deny) == 0 {
		return nil, errors.New("a principal: --allow or --deny User:name")
	}
	if filter && len(a.allow)+len(a.deny) == 0 {
		b.Allow().Deny().AllowHosts().DenyHosts()
	}
	if len(a.allow) > 0 {
		b.Allow(a.allow...).AllowHosts(a.hosts...)
	}
	if len(a.deny) > 0 {
		b.Deny(a.deny...).DenyHosts(a.hosts...)
	}
	var ops []kadm.ACLOperation
	for _, o := range a.operations {
		op, err := kmsg.ParseACLOperation(strings.ReplaceAll(strings.ToLower(o), "-", "_"))
		if err != nil || op <= kmsg.ACLOperationAny {
			return nil, fmt.Errorf("--operation %q: read, write, create, delete, alter, describe, cluster-action, describe-configs, alter-configs, idempotent-write or all", o)
		}
		ops = append(ops, op)
	}
	if !filter && len(ops) == 0 {
		return nil, errors.New("an operation: --operation")
	}
	b.Operations(ops...)
	return b, nil
}

// aclEntry is one ACL as the commands print it.
type aclEntry struct {
	ResourceType string `json:"resource_type"`
	Name         string `json:"name"`
	Pattern      string `json:"pattern"`
	Principal    string `json:"principal"`
	Host         string `json:"host"`
	Operation    string `json:"operation"`
	Permission   string `json:"permission"`
}

func newACLEntry(typ kmsg.ACLResourceType, name string, pattern kadm.ACLPattern, principal, host string, op kadm.ACLOperation,
	perm kmsg.ACLPermissionType) aclEntry {
	lower := func(s fmt.Stringer) string { return strings.ToLower(s.String()) }
	return aclEntry{ResourceType: lower(typ), Name: name, Pattern: lower(pattern), Principal: principal, Host: host,
		Operation: lower(op), Permission: lower(perm)}
}

func printACLs(cmd *cobra.Command, format string, entries []aclEntry) error {
	slices.SortFunc(entries, func(x, y aclEntry) int {
		return cmp.Or(cmp.Compare(x.ResourceType, y.ResourceType), cmp.Compare(x.Name, y.Name), cmp.Compare(x.Pattern, y.Pattern),
			cmp.Compare(x.Principal, y.Principal), cmp.Compare(x.Operation, y.Operation), cmp.Compare(x.Permission, y.Permission))
	})
	entries = slices.Compact(entries)
	w := cmd.OutOrStdout()
	if format != "table" {
		return writeData(w, format, map[string]any{"acls": entries})
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RESOURCE\tNAME\tPATTERN\tPRINCIPAL\tHOST\tOPERATION\tPERMISSION")
	for _, e := range entries {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.ResourceType, e.Name, e.Pattern, e.Principal, e.Host, e.Operation, e.Permission)
	}
	return tw.Flush()
}

func aclCreateCommand(admin adminFunc) *cobra.Command {
	var a aclFlags
	cmd := &cobra.Command{Use: "create", Short: "Allow or deny principals operations on a resource", Args: cobra.NoArgs,
		Example: `  strand acl create --allow User:alice --operation read --operation describe --topic orders
  strand acl create --allow User:alice --operation read --group app- --prefixed
  strand acl create --deny User:mallory --operation all --topic orders --host 10.0.0.9`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b, err := a.builder(false)
			if err != nil {
				return err
			}
			return admin(cmd, func(ctx context.Context, adm *kadm.Client) error {
				res, err := adm.CreateACLs(ctx, b)
				if err != nil {
					return err
				}
				var failed []string
				for _, r := range res {
					if r.Err != nil {
						failed = append(failed, fmt.Sprintf("%s %s on %s %s: %v", r.Permission, r.Operation, r.Type, r.Name, withMessage(r.Err, r.ErrMessage)))
						continue
					}
					fmt.Fprintf(cmd.OutOrStdout(), "created: %s %s %s on %s %s (%s) from %s\n", strings.ToLower(r.Permission.String()),
						r.Principal, strings.ToLower(r.Operation.String()), strings.ToLower(r.Type.String()), r.Name,
						strings.ToLower(r.Pattern.String()), r.Host)
				}
				if len(failed) > 0 {
					return errors.New(strings.Join(failed, "; "))
				}
				return nil
			})
		}}
	a.bind(cmd, false)
	return cmd
}

func aclListCommand(admin adminFunc) *cobra.Command {
	var (
		a      aclFlags
		format string
		match  bool
	)
	cmd := &cobra.Command{Use: "list", Short: "The ACLs matching the flags given (every ACL without any)", Args: cobra.NoArgs,
		Example: `  strand acl list
  strand acl list --topic orders --match
  strand acl list --allow User:alice --format json`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			b, err := a.builder(true)
			if err != nil {
				return err
			}
			if match {
				b.ResourcePatternType(kadm.ACLPatternMatch)
			}
			return admin(cmd, func(ctx context.Context, adm *kadm.Client) error {
				res, err := adm.DescribeACLs(ctx, b)
				if err != nil {
					return err
				}
				entries := []aclEntry{}
				for _, r := range res {
					if r.Err != nil {
						return withMessage(r.Err, r.ErrMessage)
					}
					for _, d := range r.Described {
						entries = append(entries, newACLEntry(d.Type, d.Name, d.Pattern, d.Principal, d.Host, d.Operation, d.Permission))
					}
				}
				return printACLs(cmd, format, entries)
			})
		}}
	a.bind(cmd, true)
	formatFlag(cmd, &format)
	cmd.Flags().BoolVar(&match, "match", false, "with a resource name: every ACL that applies to it (literal, wildcard and prefixes)")
	return cmd
}

func aclDeleteCommand(admin adminFunc) *cobra.Command {
	var a aclFlags
	cmd := &cobra.Command{Use: "delete", Short: "Delete the ACLs of a resource matching the flags given", Args: cobra.NoArgs,
		Example: `  strand acl delete --topic orders
  strand acl delete --allow User:alice --operation read --group app- --prefixed`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b, err := a.builder(true)
			if err != nil {
				return err
			}
			if !b.HasResource() || a.topic+a.group+a.transactionalID == "" && !a.cluster {
				return errors.New("a resource: --topic, --group, --transactional-id or --cluster")
			}
			return admin(cmd, func(ctx context.Context, adm *kadm.Client) error {
				res, err := adm.DeleteACLs(ctx, b)
				if err != nil {
					return err
				}
				entries := []aclEntry{}
				for _, r := range res {
					if r.Err != nil {
						return withMessage(r.Err, r.ErrMessage)
					}
					for _, d := range r.Deleted {
						if d.Err != nil {
							return withMessage(d.Err, d.ErrMessage)
						}
						entries = append(entries, newACLEntry(d.Type, d.Name, d.Pattern, d.Principal, d.Host, d.Operation, d.Permission))
					}
				}
				fmt.Fprintf(cmd.OutOrStdout(), "deleted %d ACLs\n", len(slices.Compact(entries)))
				return nil
			})
		}}
	a.bind(cmd, true)
	return cmd
}
