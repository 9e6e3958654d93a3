package main

import "github.com/spf13/cobra"

// examples are the --help examples of the commands that do not give their
// own where they are made, by command path.
var examples = map[string]string{
	"strand serve": `  strand serve                                   # ./strand-data, port 9092, admin listener and console on 127.0.0.1:9644
  strand serve --data-dir /var/lib/strand --listen 0.0.0.0:9092 --advertise kafka-1.example:9092
  strand serve --config /etc/strand/strand.conf --log-format json`,
	"strand dev-cluster": `  strand dev-cluster                             # three brokers on 9092-9094, data in ./strand-dev-cluster
  strand dev-cluster --brokers 5 --port 19092 --admin-port 19644`,
	"strand cluster info":   `  strand cluster info --format json`,
	"strand cluster health": `  strand cluster health || echo "partitions need attention"`,
	"strand topic list": `  strand topic list
  strand topic list --internal --format yaml`,
	"strand topic delete": `  strand topic delete orders payments`,
	"strand group list": `  strand group list
  strand group list --format json`,
	"strand group describe": `  strand group describe orders-processor          # members with their client software, partitions, lag
  strand group describe orders-processor --format yaml`,
	"strand group lag": `  strand group lag orders-processor
  strand group lag orders-processor --format json | jq .total_lag`,
	"strand group reset-offsets": `  strand group reset-offsets --group audit --to earliest            # prints what it would commit
  strand group reset-offsets --group audit --to latest --topic orders --execute`,
	"strand group copy-offsets": `  strand group copy-offsets --from orders-processor --to orders-processor-v2`,
	"strand group delete":       `  strand group delete old-audit`,
	"strand migrate plan": `  strand migrate plan --group orders-processor
  strand migrate plan --group orders-processor --planned 3 --protocol consumer
  strand migrate plan --brokers kafka-1:9092 --group orders-processor --link kafka-prod   # across clusters`,
	"strand migrate watch": `  strand migrate watch --group orders-processor
  strand migrate watch --group orders-processor --since 10m --interval 2s`,
	"strand migrate report": `  strand migrate report --group orders-processor --since 1h
  strand migrate report --group orders-processor --format json | jq .totals`,
	"strand profile create": `  strand profile create prod --brokers kafka-1:9093,kafka-2:9093 --tls-ca ca.pem \
    --sasl-mechanism SCRAM-SHA-512 --sasl-user ops --sasl-password "$OPS_PASSWORD"
  strand profile create local --brokers 127.0.0.1:9092 --use`,
	"strand profile use":    `  strand profile use prod`,
	"strand profile list":   `  strand profile list --format json`,
	"strand profile delete": `  strand profile delete staging`,
	"strand link create": `  strand link create kafka-prod --source-brokers kafka-1:9092,kafka-2:9092 --topics 'orders.*' --groups 'orders-.*'
  strand link create kafka-prod --source-brokers kafka-1:9093 --topics '.*' --exclude-topics 'tmp-.*' \
    --source-tls-ca ca.pem --source-sasl-mechanism SCRAM-SHA-512 --source-sasl-user mirror --sync-topic-configs`,
	"strand link alter": `  strand link alter kafka-prod --topics 'orders.*|payments.*'
  strand link alter kafka-prod --groups orders-processor --group-pass-through   # its consumers move one by one
  strand link alter kafka-prod --auto-promote-groups   # a group moves home once its members all left Kafka
  strand link alter kafka-prod --source-sasl-password "$NEW_PASSWORD"   # the rest of the source's settings stay`,
	"strand link list":          `  strand link list --format json`,
	"strand link status":        `  strand link status kafka-prod --format json | jq '[.topics[].partitions[].lag_records] | add'`,
	"strand link pause":         `  strand link pause kafka-prod`,
	"strand link resume":        `  strand link resume kafka-prod`,
	"strand link promote":       `  strand link promote kafka-prod --topic orders --timeout 2m`,
	"strand link promote-group": `  strand link promote-group kafka-prod --group orders-processor   # its members are all on Strand now`,
	"strand link failover":      `  strand link failover kafka-prod                # the source is gone: every mirror writable now`,
	"strand link delete":        `  strand link delete kafka-prod`,
	"strand version": `  strand version                                 # also: strand --version
  strand version --format json | jq -r .commit`,
}

// addExamples gives the commands their examples from the table.
func addExamples(c *cobra.Command) {
	if ex, ok := examples[c.CommandPath()]; ok && c.Example == "" {
		c.Example = ex
	}
	for _, sub := range c.Commands() {
		addExamples(sub)
	}
}
