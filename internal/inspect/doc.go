// Package inspect reads what a Kafka cluster holds through the Kafka
// protocol (franz-go's admin client), so that it works against any Kafka
// cluster: topics with their partitions, offsets, sizes and configs, and
// groups with their members, commits and lag. The command-line tools and
// the web console show the same figures because both read them here.
package inspect
