package compat

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/strandlog/strand/test/grouptest"
	"github.com/strandlog/strand/test/javatest"
)

// TestConsumerGroupRecordsKafkaSerde: Kafka's own coordinator record serde
// (GroupCoordinatorRecordSerde, run by test/java's CoordinatorRecords)
// reads every record Strand wrote to __consumer_offsets for a group in the
// middle of a migration: a classic member and a consumer-protocol one, and
// the classic one leaving. The records are Kafka's types with Kafka's
// fields: the classic member's protocols, the partitions' assignment
// epochs (KIP-1251), the tombstones.
func TestConsumerGroupRecordsKafkaSerde(t *testing.T) {
	t.Parallel()
	javatest.Helper(t)
	b := startBroker(t, append(consumerGroupBrokerArgs, groupBrokerArgs...)...)
	ctx := groupCtx(t, 2*time.Minute)
	createTopic(t, b.Addr, "orders", 4, nil)
	adm := grouptest.Admin(t, b.Addr)
	classic, modern := mixedGroup(t, ctx, adm, b.Addr, "records")
	if err := classic.Stop(); err != nil {
		t.Fatal(err)
	}
	grouptest.WaitSettled(t, ctx, adm, "records", "orders", 4, modern)

	r := runKafkaTool(t, "strandlog.compat.CoordinatorRecords", b.Addr, "__consumer_offsets")
	if r.err != nil {
		t.Fatalf("CoordinatorRecords: %v", r)
	}
	t.Logf("%s", r.stdout)
	if strings.Contains(r.stdout, "\nerror ") || strings.HasPrefix(r.stdout, "error ") {
		t.Errorf("Kafka's serde could not read some records")
	}
	for _, want := range []string{
		`(?m)^record 2 GroupMetadataKey\(group='records'\) tombstone$`, // the classic record, deleted at the upgrade
		`(?m)^record 3 ConsumerGroupMetadataKey\(groupId='records'\) ConsumerGroupMetadataValue\(epoch=\d+`,
		`(?m)^record 4 ConsumerGroupPartitionMetadataKey\(groupId='records'\) ConsumerGroupPartitionMetadataValue\(topics=\[TopicMetadata\(topicId=\S+, topicName='orders', numPartitions=4`,
		`(?m)^record 5 ConsumerGroupMemberMetadataKey\(groupId='records', memberId='records-classic-\S+'\) .*clientId='records-classic'.*classicMemberMetadata=ClassicMemberMetadata\(sessionTimeoutMs=\d+, supportedProtocols=\[ClassicProtocol\(name='cooperative-sticky'`,
		`(?m)^record 5 ConsumerGroupMemberMetadataKey\(groupId='records', memberId='\S+'\) .*clientId='records-modern'.*subscribedTopicNames=\[orders\]`,
		`(?m)^record 6 ConsumerGroupTargetAssignmentMetadataKey\(groupId='records'\) ConsumerGroupTargetAssignmentMetadataValue\(assignmentEpoch=\d+`,
		`(?m)^record 7 ConsumerGroupTargetAssignmentMemberKey\(groupId='records', memberId='\S+'\) ConsumerGroupTargetAssignmentMemberValue\(topicPartitions=\[TopicPartition\(topicId=\S+, partitions=\[`,
		`(?m)^record 8 ConsumerGroupCurrentMemberAssignmentKey\(groupId='records', memberId='\S+'\) ConsumerGroupCurrentMemberAssignmentValue\(memberEpoch=\d+, previousMemberEpoch=\d+, state=0, assignedPartitions=\[TopicPartitions\(topicId=\S+, partitions=\[[0-9, ]+\], assignmentEpochs=\[[0-9, ]+\]\)`,
		`(?m)^record 8 ConsumerGroupCurrentMemberAssignmentKey\(groupId='records', memberId='records-classic-\S+'\) tombstone$`,
		`(?m)^record 5 ConsumerGroupMemberMetadataKey\(groupId='records', memberId='records-classic-\S+'\) tombstone$`,
	} {
		if !regexp.MustCompile(want).MatchString(r.stdout) {
			t.Errorf("the decoded records lack %s", want)
		}
	}
}
