package server_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
	kscram "github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/strandlog/strand/internal/cluster"
	"github.com/strandlog/strand/internal/config"
	"github.com/strandlog/strand/internal/ledger"
	"github.com/strandlog/strand/internal/model"
	"github.com/strandlog/strand/internal/peer"
	"github.com/strandlog/strand/internal/scram"
	"github.com/strandlog/strand/internal/share"
	"github.com/strandlog/strand/internal/testutil"
)

// The authorisation table: for each API, a principal without the ACLs
// Kafka's authorizer asks for gets Kafka's error, and with them (added one
// at a time where Kafka checks several resources) gets past each check.
// The expectations come from Kafka's rules (KafkaApis and its docs' table
// of operations and resources), not from the handlers.

// Short names of Kafka's codes for the table.
const (
	aclTopic = int8(kmsg.ACLResourceTypeTopic)
	aclGroup = int8(kmsg.ACLResourceTypeGroup)
	aclClust = int8(kmsg.ACLResourceTypeCluster)
	aclTxnID = int8(kmsg.ACLResourceTypeTransactionalId)
)

// notAuthFailure stands for any answer but an authorization failure: the
// request got past the authorizer and failed, or not, on its own merits.
const notAuthFailure int16 = -1000

func allowACL(rt int8, name string, op kmsg.ACLOperation) model.ACLBinding {
	return model.ACLBinding{ResourceType: rt, ResourceName: name, PatternType: int8(kmsg.ACLResourcePatternTypeLiteral),
		Principal: "User:alice", Host: "*", Operation: int8(op), Permission: int8(kmsg.ACLPermissionTypeAllow)}
}

// authStage is what alice is granted, and the code she then gets.
type authStage struct {
	grant []model.ACLBinding
	want  int16
}

type authCase struct {
	name string
	// oldTxn sends the request as a client that knows AddPartitionsToTxn
	// up to v3 (v4 is for brokers).
	oldTxn bool
	// asPeer sends the request with a broker's client id.
	asPeer bool
	req    func() kmsg.Request
	code   func(kmsg.Response) int16
	stages []authStage
}

var authCodes = []int16{kerr.TopicAuthorizationFailed.Code, kerr.GroupAuthorizationFailed.Code,
	kerr.ClusterAuthorizationFailed.Code, kerr.TransactionalIDAuthorizationFailed.Code}

// authBroker starts a SASL broker with the ACL authorizer, super user
// admin and user alice, a topic orders (one partition, one record) and a
// group app with a committed offset.
func authBroker(t *testing.T) (*testutil.Broker, *kgo.Client, *kgo.Client) {
	t.Helper()
	b := saslBroker(t, "SASL_PLAINTEXT", func(c *config.Broker) {
		c.Authorizer, c.SuperUsers = "acl", "User:admin;User:ops"
	})
	md := b.Server().Metadata()
	c, err := scram.SHA512.NewCredential("admin-secret", 4096)
	if err != nil {
		t.Fatal(err)
	}
	if err := md.AlterScramCredentials([]cluster.ScramCredentialChange{{User: "admin", Mechanism: int8(scram.SHA512),
		Credential: cluster.ScramCredential(c)}}, nil); err != nil {
		t.Fatal(err)
	}
	as := func(user, pass string) *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.SASL(kscram.Auth{User: user, Pass: pass}.AsSha512Mechanism()),
			kgo.RequestRetries(0), kgo.RetryTimeout(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	admin, alice := as("admin", "admin-secret"), as("alice", "alice-secret")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	create := kmsg.NewPtrCreateTopicsRequest()
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = "orders", 1, 1
	create.Topics = append(create.Topics, ct)
	if resp, err := create.RequestWith(ctx, admin); err != nil || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("creating orders as admin: %v %+v", err, resp)
	}
	if err := admin.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatalf("producing as admin: %v", err)
	}
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Group, commit.Generation = "app", -1
	commit.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "orders", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1}}}}
	if resp, err := commit.RequestWith(ctx, admin); err != nil || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("committing as admin: %v %+v", err, resp)
	}
	return b, admin, alice
}

func TestAuthorizationTable(t *testing.T) {
	b, _, alice := authBroker(t)
	v3 := kversion.Stable()
	v3.SetMaxKeyVersion(24, 3)
	oldAlice, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.SASL(kscram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism()),
		kgo.MaxVersions(v3), kgo.RequestRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	defer oldAlice.Close()
	peerAlice, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.SASL(kscram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism()),
		kgo.ClientID(peer.ClientIDPrefix+"9"), kgo.RequestRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	defer peerAlice.Close()
	md := b.Server().Metadata()
	str := kmsg.StringPtr
	topicRead, topicWrite, topicDescribe := allowACL(aclTopic, "orders", kmsg.ACLOperationRead),
		allowACL(aclTopic, "orders", kmsg.ACLOperationWrite), allowACL(aclTopic, "orders", kmsg.ACLOperationDescribe)
	groupRead, groupDescribe := allowACL(aclGroup, "app", kmsg.ACLOperationRead), allowACL(aclGroup, "app", kmsg.ACLOperationDescribe)
	txnWrite := allowACL(aclTxnID, "tx", kmsg.ACLOperationWrite)
	cluster := func(op kmsg.ACLOperation) model.ACLBinding { return allowACL(aclClust, "kafka-cluster", op) }
	deny := func(x model.ACLBinding) model.ACLBinding {
		x.Permission = int8(kmsg.ACLPermissionTypeDeny)
		return x
	}
	acls := func(xs ...model.ACLBinding) []model.ACLBinding { return xs }
	orders, _ := md.Topic("orders")
	ordersID := orders.ID

	cases := []authCase{
		{name: "Metadata of a named topic: DESCRIBE (READ implies it)",
			req: func() kmsg.Request {
				r := kmsg.NewPtrMetadataRequest()
				r.Topics = []kmsg.MetadataRequestTopic{{Topic: str("orders")}}
				return r
			},
			code:   func(r kmsg.Response) int16 { return r.(*kmsg.MetadataResponse).Topics[0].ErrorCode },
			stages: []authStage{{nil, kerr.TopicAuthorizationFailed.Code}, {acls(topicRead), 0}}},
		{name: "Metadata of an unknown topic without DESCRIBE is refused, not revealed",
			req: func() kmsg.Request {
				r := kmsg.NewPtrMetadataRequest()
				r.Topics = []kmsg.MetadataRequestTopic{{Topic: str("nope")}}
				return r
			},
			code:   func(r kmsg.Response) int16 { return r.(*kmsg.MetadataResponse).Topics[0].ErrorCode },
			stages: []authStage{{nil, kerr.TopicAuthorizationFailed.Code}}},
		{name: "Metadata auto-creation: DESCRIBE, then CREATE",
			req: func() kmsg.Request {
				r := kmsg.NewPtrMetadataRequest()
				r.Topics = []kmsg.MetadataRequestTopic{{Topic: str("auto")}}
				r.AllowAutoTopicCreation = true
				return r
			},
			code: func(r kmsg.Response) int16 { return r.(*kmsg.MetadataResponse).Topics[0].ErrorCode },
			stages: []authStage{{nil, kerr.TopicAuthorizationFailed.Code},
				{acls(allowACL(aclTopic, "auto", kmsg.ACLOperationDescribe)), kerr.UnknownTopicOrPartition.Code},
				{acls(allowACL(aclTopic, "auto", kmsg.ACLOperationDescribe), allowACL(aclTopic, "auto", kmsg.ACLOperationCreate)), kerr.LeaderNotAvailable.Code}}},
		{name: "Produce: WRITE on the topic; a deny wins",
			req:  func() kmsg.Request { return produceOne("orders") },
			code: func(r kmsg.Response) int16 { return r.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode },
			stages: []authStage{{nil, kerr.TopicAuthorizationFailed.Code}, {acls(topicWrite), 0},
				{acls(topicWrite, deny(topicWrite)), kerr.TopicAuthorizationFailed.Code}}},
		{name: "Produce: a prefixed WRITE",
			req:  func() kmsg.Request { return produceOne("orders") },
			code: func(r kmsg.Response) int16 { return r.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode },
			stages: []authStage{{acls(model.ACLBinding{ResourceType: aclTopic, ResourceName: "ord", PatternType: int8(kmsg.ACLResourcePatternTypePrefixed),
				Principal: "User:alice", Host: "*", Operation: int8(kmsg.ACLOperationWrite), Permission: int8(kmsg.ACLPermissionTypeAllow)}), 0}}},
		{name: "Produce: an ACL for another host does not apply",
			req:  func() kmsg.Request { return produceOne("orders") },
			code: func(r kmsg.Response) int16 { return r.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode },
			stages: []authStage{{acls(func() model.ACLBinding { x := topicWrite; x.Host = "10.9.9.9"; return x }()), kerr.TopicAuthorizationFailed.Code},
				{acls(func() model.ACLBinding { x := topicWrite; x.Host = "127.0.0.1"; return x }()), 0}}},
		{name: "Produce: an ACL for every user applies to alice",
			req:  func() kmsg.Request { return produceOne("orders") },
			code: func(r kmsg.Response) int16 { return r.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode },
			stages: []authStage{{acls(func() model.ACLBinding { x := topicWrite; x.Principal = "User:*"; return x }()), 0},
				{acls(func() model.ACLBinding { x := topicWrite; x.Principal = "User:bob"; return x }()), kerr.TopicAuthorizationFailed.Code}}},
		{name: "Produce to the hand-off ledger as another broker: CLUSTER_ACTION, else the topic is internal",
			asPeer: true,
			req:    func() kmsg.Request { return produceOne(ledger.Topic) },
			code:   func(r kmsg.Response) int16 { return r.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode },
			stages: []authStage{{acls(allowACL(aclTopic, ledger.Topic, kmsg.ACLOperationWrite)), kerr.InvalidTopicException.Code},
				// Past the check: the topic is made with a group's first hand-off.
				{acls(allowACL(aclTopic, ledger.Topic, kmsg.ACLOperationWrite), cluster(kmsg.ACLOperationClusterAction)), kerr.UnknownTopicOrPartition.Code}}},
		{name: "Produce to __consumer_offsets as another broker: refused, the coordinator writes it",
			asPeer: true,
			req:    func() kmsg.Request { return produceOne("__consumer_offsets") },
			code:   func(r kmsg.Response) int16 { return r.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode },
			stages: []authStage{{acls(allowACL(aclTopic, "__consumer_offsets", kmsg.ACLOperationWrite), cluster(kmsg.ACLOperationClusterAction)),
				kerr.InvalidTopicException.Code}}},
		{name: "Fetch: READ on the topic (DESCRIBE is not enough)",
			req: func() kmsg.Request {
				r := kmsg.NewPtrFetchRequest()
				r.ReplicaID, r.MaxBytes, r.SessionEpoch = -1, 1<<20, -1
				r.Topics = []kmsg.FetchRequestTopic{{Topic: "orders", TopicID: ordersID, Partitions: []kmsg.FetchRequestTopicPartition{{Partition: 0, PartitionMaxBytes: 1 << 20, CurrentLeaderEpoch: -1}}}}
				return r
			},
			code: func(r kmsg.Response) int16 {
				resp := r.(*kmsg.FetchResponse)
				if resp.ErrorCode != 0 {
					return resp.ErrorCode
				}
				return resp.Topics[0].Partitions[0].ErrorCode
			},
			stages: []authStage{{nil, kerr.TopicAuthorizationFailed.Code}, {acls(topicDescribe), kerr.TopicAuthorizationFailed.Code}, {acls(topicRead), 0}}},
		{name: "ListOffsets: DESCRIBE on the topic",
			req: func() kmsg.Request {
				r := kmsg.NewPtrListOffsetsRequest()
				r.ReplicaID = -1
				r.Topics = []kmsg.ListOffsetsRequestTopic{{Topic: "orders", Partitions: []kmsg.ListOffsetsRequestTopicPartition{{Partition: 0, Timestamp: -1, CurrentLeaderEpoch: -1}}}}
				return r
			},
			code:   func(r kmsg.Response) int16 { return r.(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0].ErrorCode },
			stages: []authStage{{nil, kerr.TopicAuthorizationFailed.Code}, {acls(topicDescribe), 0}}},
		{name: "OffsetForLeaderEpoch of a consumer: DESCRIBE on the topic",
			req: func() kmsg.Request {
				r := kmsg.NewPtrOffsetForLeaderEpochRequest()
				r.ReplicaID = -1
				r.Topics = []kmsg.OffsetForLeaderEpochRequestTopic{{Topic: "orders", Partitions: []kmsg.OffsetForLeaderEpochRequestTopicPartition{{Partition: 0, CurrentLeaderEpoch: -1, LeaderEpoch: 0}}}}
				return r
			},
			code: func(r kmsg.Response) int16 {
				return r.(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions[0].ErrorCode
			},
			stages: []authStage{{nil, kerr.TopicAuthorizationFailed.Code}, {acls(topicDescribe), 0}}},
		{name: "FindCoordinator of a group: DESCRIBE on it",
			req: func() kmsg.Request {
				r := kmsg.NewPtrFindCoordinatorRequest()
				r.CoordinatorKey = "app"
				r.CoordinatorKeys = []string{"app"}
				return r
			},
			code:   findCoordinatorCode,
			stages: []authStage{{nil, kerr.GroupAuthorizationFailed.Code}, {acls(groupDescribe), 0}}},
		{name: "FindCoordinator of a transactional id: DESCRIBE on it",
			req: func() kmsg.Request {
				r := kmsg.NewPtrFindCoordinatorRequest()
				r.CoordinatorType, r.CoordinatorKey, r.CoordinatorKeys = 1, "tx", []string{"tx"}
				return r
			},
			code:   findCoordinatorCode,
			stages: []authStage{{nil, kerr.TransactionalIDAuthorizationFailed.Code}, {acls(allowACL(aclTxnID, "tx", kmsg.ACLOperationDescribe)), 0}}},
		{name: "FindCoordinator of a share-partition: CLUSTER_ACTION, as brokers ask it",
			req: func() kmsg.Request {
				r := kmsg.NewPtrFindCoordinatorRequest()
				key := share.CoordinatorKey(share.Key{Group: "app", TopicID: ordersID, Partition: 0})
				r.CoordinatorType, r.CoordinatorKey, r.CoordinatorKeys = 2, key, []string{key}
				return r
			},
			code:   findCoordinatorCode,
			stages: []authStage{{acls(groupDescribe), kerr.ClusterAuthorizationFailed.Code}, {acls(cluster(kmsg.ACLOperationClusterAction)), 0}}},
		{name: "JoinGroup: READ on the group",
			req: func() kmsg.Request {
				r := kmsg.NewPtrJoinGroupRequest()
				r.Group, r.SessionTimeoutMillis, r.RebalanceTimeoutMillis, r.ProtocolType = "app", 10000, 10000, "consumer"
				r.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{}}}
				return r
			},
			code:   func(r kmsg.Response) int16 { return r.(*kmsg.JoinGroupResponse).ErrorCode },
			stages: []authStage{{acls(groupDescribe), kerr.GroupAuthorizationFailed.Code}, {acls(groupRead), kerr.MemberIDRequired.Code}}},
		{name: "Heartbeat: READ on the group",
			req: func() kmsg.Request {
				r := kmsg.NewPtrHeartbeatRequest()
				r.Group, r.MemberID, r.Generation = "app", "m", 1
				return r
			},
			code:   func(r kmsg.Response) int16 { return r.(*kmsg.HeartbeatResponse).ErrorCode },
			stages: []authStage{{nil, kerr.GroupAuthorizationFailed.Code}, {acls(groupRead), notAuthFailure}}},
		{name: "SyncGroup: READ on the group",
			req: func() kmsg.Request {
				r := kmsg.NewPtrSyncGroupRequest()
				r.Group, r.MemberID, r.Generation = "app", "m", 1
				return r
			},
			code:   func(r kmsg.Response) int16 { return r.(*kmsg.SyncGroupResponse).ErrorCode },
			stages: []authStage{{nil, kerr.GroupAuthorizationFailed.Code}, {acls(groupRead), notAuthFailure}}},
		{name: "LeaveGroup: READ on the group",
			req: func() kmsg.Request {
				r := kmsg.NewPtrLeaveGroupRequest()
				r.Group = "app"
				r.Members = []kmsg.LeaveGroupRequestMember{{MemberID: "m"}}
				return r
			},
			code:   func(r kmsg.Response) int16 { return r.(*kmsg.LeaveGroupResponse).ErrorCode },
			stages: []authStage{{nil, kerr.GroupAuthorizationFailed.Code}, {acls(groupRead), 0}}},
		{name: "OffsetCommit: READ on the group, then on the topic",
			req: func() kmsg.Request {
				r := kmsg.NewPtrOffsetCommitRequest()
				r.Group, r.Generation = "app", -1
				r.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "orders", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1}}}}
				return r
			},
			code: func(r kmsg.Response) int16 { return r.(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode },
			stages: []authStage{{acls(topicRead), kerr.GroupAuthorizationFailed.Code}, {acls(groupRead), kerr.TopicAuthorizationFailed.Code},
				{acls(groupRead, topicRead), 0}}},
		{name: "OffsetFetch: DESCRIBE on the group, then on the topic",
			req: func() kmsg.Request {
				r := kmsg.NewPtrOffsetFetchRequest()
				r.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "app", Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "orders", Partitions: []int32{0}}}}}
				return r
			},
			code: func(r kmsg.Response) int16 {
				g := r.(*kmsg.OffsetFetchResponse).Groups[0]
				if g.ErrorCode != 0 {
					return g.ErrorCode
				}
				return g.Topics[0].Partitions[0].ErrorCode
			},
			stages: []authStage{{nil, kerr.GroupAuthorizationFailed.Code}, {acls(groupDescribe), kerr.TopicAuthorizationFailed.Code},
				{acls(groupDescribe, topicDescribe), 0}}},
		{name: "DescribeGroups: DESCRIBE on the group",
			req: func() kmsg.Request {
				r := kmsg.NewPtrDescribeGroupsRequest()
				r.Groups = []string{"app"}
				return r
			},
			code:   func(r kmsg.Response) int16 { return r.(*kmsg.DescribeGroupsResponse).Groups[0].ErrorCode },
			stages: []authStage{{nil, kerr.GroupAuthorizationFailed.Code}, {acls(groupDescribe), 0}}},
		{name: "ConsumerGroupDescribe: DESCRIBE on the group",
			req: func() kmsg.Request {
				r := kmsg.NewPtrConsumerGroupDescribeRequest()
				r.Groups = []string{"app"}
				return r
			},
			code:   func(r kmsg.Response) int16 { return r.(*kmsg.ConsumerGroupDescribeResponse).Groups[0].ErrorCode },
			stages: []authStage{{nil, kerr.GroupAuthorizationFailed.Code}, {acls(groupDescribe), notAuthFailure}}},
		{name: "ConsumerGroupHeartbeat: READ on the group, DESCRIBE on the topics subscribed",
			req: func() kmsg.Request {
				r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
				r.Group, r.MemberID, r.MemberEpoch, r.RebalanceTimeoutMillis = "app848", "member-1", 0, 10000
				r.SubscribedTopicNames = []string{"orders"}
				r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
				return r
			},
			code: func(r kmsg.Response) int16 { return r.(*kmsg.ConsumerGroupHeartbeatResponse).ErrorCode },
			stages: []authStage{{nil, kerr.GroupAuthorizationFailed.Code},
				{acls(allowACL(aclGroup, "app848", kmsg.ACLOperationRead)), kerr.TopicAuthorizationFailed.Code},
				{acls(allowACL(aclGroup, "app848", kmsg.ACLOperationRead), topicDescribe), 0}}},
		{name: "CreateTopics: CREATE on the topic or the cluster",
			req: func() kmsg.Request {
				r := kmsg.NewPtrCreateTopicsRequest()
				r.ValidateOnly = true
				r.Topics = []kmsg.CreateTopicsRequestTopic{{Topic: "fresh", NumPartitions: 1, ReplicationFactor: 1}}
				return r
			},
			code: func(r kmsg.Response) int16 { return r.(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode },
			stages: []authStage{{nil, kerr.TopicAuthorizationFailed.Code}, {acls(allowACL(aclTopic, "fresh", kmsg.ACLOperationCreate)), 0},
				{acls(cluster(kmsg.ACLOperationCreate)), 0}}},
		{name: "DeleteTopics: DELETE on the topic, whether or not it exists",
			req: func() kmsg.Request {
				r := kmsg.NewPtrDeleteTopicsRequest()
				r.TopicNames = []string{"ghost"}
				r.Topics = []kmsg.DeleteTopicsRequestTopic{{Topic: str("ghost")}}
				return r
			},
			code: func(r kmsg.Response) int16 { return r.(*kmsg.DeleteTopicsResponse).Topics[0].ErrorCode },
			stages: []authStage{{nil, kerr.TopicAuthorizationFailed.Code},
				{acls(allowACL(aclTopic, "ghost", kmsg.ACLOperationDelete)), kerr.UnknownTopicOrPartition.Code}}},
		{name: "DeleteRecords: DELETE on the topic",
			req: func() kmsg.Request {
				r := kmsg.NewPtrDeleteRecordsRequest()
				r.TimeoutMillis = 5000
				r.Topics = []kmsg.DeleteRecordsRequestTopic{{Topic: "orders", Partitions: []kmsg.DeleteRecordsRequestTopicPartition{{Partition: 0, Offset: 0}}}}
				return r
			},
			code:   func(r kmsg.Response) int16 { return r.(*kmsg.DeleteRecordsResponse).Topics[0].Partitions[0].ErrorCode },
			stages: []authStage{{acls(topicWrite), kerr.TopicAuthorizationFailed.Code}, {acls(allowACL(aclTopic, "orders", kmsg.ACLOperationDelete)), 0}}},
		{name: "CreatePartitions: ALTER on the topic",
			req: func() kmsg.Request {
				r := kmsg.NewPtrCreatePartitionsRequest()
				r.ValidateOnly, r.TimeoutMillis = true, 5000
				r.Topics = []kmsg.CreatePartitionsRequestTopic{{Topic: "orders", Count: 2}}
				return r
			},
			code:   func(r kmsg.Response) int16 { return r.(*kmsg.CreatePartitionsResponse).Topics[0].ErrorCode },
			stages: []authStage{{acls(topicWrite), kerr.TopicAuthorizationFailed.Code}, {acls(allowACL(aclTopic, "orders", kmsg.ACLOperationAlter)), 0}}},
		{name: "DescribeConfigs of a topic: DESCRIBE_CONFIGS (ALTER_CONFIGS implies it)",
			req:  func() kmsg.Request { return describeConfigs(kmsg.ConfigResourceTypeTopic, "orders") },
			code: func(r kmsg.Response) int16 { return r.(*kmsg.DescribeConfigsResponse).Resources[0].ErrorCode },
			stages: []authStage{{acls(topicRead), kerr.TopicAuthorizationFailed.Code},
				{acls(allowACL(aclTopic, "orders", kmsg.ACLOperationAlterConfigs)), 0}}},
		{name: "DescribeConfigs of the brokers: DESCRIBE_CONFIGS on the cluster",
			req:    func() kmsg.Request { return describeConfigs(kmsg.ConfigResourceTypeBroker, "") },
			code:   func(r kmsg.Response) int16 { return r.(*kmsg.DescribeConfigsResponse).Resources[0].ErrorCode },
			stages: []authStage{{nil, kerr.ClusterAuthorizationFailed.Code}, {acls(cluster(kmsg.ACLOperationDescribeConfigs)), 0}}},
		{name: "IncrementalAlterConfigs of a topic: ALTER_CONFIGS on it",
			req: func() kmsg.Request {
				r := kmsg.NewPtrIncrementalAlterConfigsRequest()
				r.ValidateOnly = true
				r.Resources = []kmsg.IncrementalAlterConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "orders",
					Configs: []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: "retention.ms", Value: str("1000")}}}}
				return r
			},
			code: func(r kmsg.Response) int16 { return r.(*kmsg.IncrementalAlterConfigsResponse).Resources[0].ErrorCode },
			stages: []authStage{{acls(allowACL(aclTopic, "orders", kmsg.ACLOperationDescribeConfigs)), kerr.TopicAuthorizationFailed.Code},
				{acls(allowACL(aclTopic, "orders", kmsg.ACLOperationAlterConfigs)), 0}}},
		{name: "AlterConfigs of the brokers: ALTER_CONFIGS on the cluster",
			req: func() kmsg.Request {
				r := kmsg.NewPtrAlterConfigsRequest()
				r.ValidateOnly = true
				r.Resources = []kmsg.AlterConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeBroker, ResourceName: "",
					Configs: []kmsg.AlterConfigsRequestResourceConfig{{Name: "log.retention.ms", Value: str("100000")}}}}
				return r
			},
			code:   func(r kmsg.Response) int16 { return r.(*kmsg.AlterConfigsResponse).Resources[0].ErrorCode },
			stages: []authStage{{nil, kerr.ClusterAuthorizationFailed.Code}, {acls(cluster(kmsg.ACLOperationAlterConfigs)), 0}}},
		{name: "DescribeLogDirs: DESCRIBE on the cluster",
			req:    func() kmsg.Request { return kmsg.NewPtrDescribeLogDirsRequest() },
			code:   func(r kmsg.Response) int16 { return r.(*kmsg.DescribeLogDirsResponse).ErrorCode },
			stages: []authStage{{nil, kerr.ClusterAuthorizationFailed.Code}, {acls(cluster(kmsg.ACLOperationDescribe)), 0}}},
		{name: "ElectLeaders: ALTER on the cluster",
			req: func() kmsg.Request {
				r := kmsg.NewPtrElectLeadersRequest()
				r.TimeoutMillis = 5000
				r.Topics = []kmsg.ElectLeadersRequestTopic{{Topic: "orders", Partitions: []int32{0}}}
				return r
			},
			code: func(r kmsg.Response) int16 {
				resp := r.(*kmsg.ElectLeadersResponse)
				if resp.ErrorCode != 0 {
					return resp.ErrorCode
				}
				return resp.Topics[0].Partitions[0].ErrorCode
			},
			stages: []authStage{{acls(cluster(kmsg.ACLOperationDescribe)), kerr.ClusterAuthorizationFailed.Code},
				{acls(cluster(kmsg.ACLOperationAlter)), kerr.ElectionNotNeeded.Code}}},
		{name: "ListPartitionReassignments: DESCRIBE on the cluster",
			req:    func() kmsg.Request { return kmsg.NewPtrListPartitionReassignmentsRequest() },
			code:   func(r kmsg.Response) int16 { return r.(*kmsg.ListPartitionReassignmentsResponse).ErrorCode },
			stages: []authStage{{nil, kerr.ClusterAuthorizationFailed.Code}, {acls(cluster(kmsg.ACLOperationDescribe)), 0}}},
		{name: "AlterPartitionReassignments: ALTER on the cluster",
			req:    func() kmsg.Request { return kmsg.NewPtrAlterPartitionAssignmentsRequest() },
			code:   func(r kmsg.Response) int16 { return r.(*kmsg.AlterPartitionAssignmentsResponse).ErrorCode },
			stages: []authStage{{acls(cluster(kmsg.ACLOperationDescribe)), kerr.ClusterAuthorizationFailed.Code}, {acls(cluster(kmsg.ACLOperationAlter)), 0}}},
		{name: "OffsetDelete: DELETE on the group, READ on the topic",
			req: func() kmsg.Request {
				r := kmsg.NewPtrOffsetDeleteRequest()
				r.Group = "app"
				r.Topics = []kmsg.OffsetDeleteRequestTopic{{Topic: "orders", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}}}
				return r
			},
			code: func(r kmsg.Response) int16 {
				resp := r.(*kmsg.OffsetDeleteResponse)
				if resp.ErrorCode != 0 {
					return resp.ErrorCode
				}
				return resp.Topics[0].Partitions[0].ErrorCode
			},
			stages: []authStage{{acls(groupRead), kerr.GroupAuthorizationFailed.Code},
				{acls(allowACL(aclGroup, "app", kmsg.ACLOperationDelete)), kerr.TopicAuthorizationFailed.Code}}},
		{name: "DescribeClientQuotas: DESCRIBE_CONFIGS on the cluster",
			req:    func() kmsg.Request { return kmsg.NewPtrDescribeClientQuotasRequest() },
			code:   func(r kmsg.Response) int16 { return r.(*kmsg.DescribeClientQuotasResponse).ErrorCode },
			stages: []authStage{{nil, kerr.ClusterAuthorizationFailed.Code}, {acls(cluster(kmsg.ACLOperationDescribeConfigs)), 0}}},
		{name: "DescribeUserScramCredentials: DESCRIBE on the cluster",
			req:    func() kmsg.Request { return kmsg.NewPtrDescribeUserSCRAMCredentialsRequest() },
			code:   func(r kmsg.Response) int16 { return r.(*kmsg.DescribeUserSCRAMCredentialsResponse).ErrorCode },
			stages: []authStage{{nil, kerr.ClusterAuthorizationFailed.Code}, {acls(cluster(kmsg.ACLOperationDescribe)), 0}}},
		{name: "AlterUserScramCredentials: ALTER on the cluster",
			req: func() kmsg.Request {
				r := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
				r.Deletions = []kmsg.AlterUserSCRAMCredentialsRequestDeletion{{Name: "nobody", Mechanism: 1}}
				return r
			},
			code: func(r kmsg.Response) int16 { return r.(*kmsg.AlterUserSCRAMCredentialsResponse).Results[0].ErrorCode },
			stages: []authStage{{acls(cluster(kmsg.ACLOperationDescribe)), kerr.ClusterAuthorizationFailed.Code},
				{acls(cluster(kmsg.ACLOperationAlter)), kerr.ResourceNotFound.Code}}},
		{name: "DescribeQuorum: DESCRIBE on the cluster",
			req: func() kmsg.Request {
				r := kmsg.NewPtrDescribeQuorumRequest()
				r.Topics = []kmsg.DescribeQuorumRequestTopic{{Topic: "__cluster_metadata", Partitions: []kmsg.DescribeQuorumRequestTopicPartition{{Partition: 0}}}}
				return r
			},
			code:   func(r kmsg.Response) int16 { return r.(*kmsg.DescribeQuorumResponse).ErrorCode },
			stages: []authStage{{nil, kerr.ClusterAuthorizationFailed.Code}, {acls(cluster(kmsg.ACLOperationDescribe)), 0}}},
		{name: "DescribeProducers: READ on the topic",
			req: func() kmsg.Request {
				r := kmsg.NewPtrDescribeProducersRequest()
				r.Topics = []kmsg.DescribeProducersRequestTopic{{Topic: "orders", Partitions: []int32{0}}}
				return r
			},
			code: func(r kmsg.Response) int16 {
				return r.(*kmsg.DescribeProducersResponse).Topics[0].Partitions[0].ErrorCode
			},
			stages: []authStage{{acls(topicDescribe), kerr.TopicAuthorizationFailed.Code}, {acls(topicRead), 0}}},
		{name: "InitProducerId, transactional: WRITE on the transactional id",
			req: func() kmsg.Request {
				r := kmsg.NewPtrInitProducerIDRequest()
				r.TransactionalID, r.TransactionTimeoutMillis = str("tx"), 10000
				return r
			},
			code:   func(r kmsg.Response) int16 { return r.(*kmsg.InitProducerIDResponse).ErrorCode },
			stages: []authStage{{acls(allowACL(aclTxnID, "tx", kmsg.ACLOperationDescribe)), kerr.TransactionalIDAuthorizationFailed.Code}, {acls(txnWrite), 0}}},
		{name: "InitProducerId, idempotent: IDEMPOTENT_WRITE on the cluster, or WRITE on some topic",
			req:  func() kmsg.Request { return kmsg.NewPtrInitProducerIDRequest() },
			code: func(r kmsg.Response) int16 { return r.(*kmsg.InitProducerIDResponse).ErrorCode },
			stages: []authStage{{acls(topicRead), kerr.ClusterAuthorizationFailed.Code}, {acls(topicWrite), 0},
				{acls(topicWrite, deny(topicWrite)), kerr.ClusterAuthorizationFailed.Code}, {acls(cluster(kmsg.ACLOperationIdempotentWrite)), 0}}},
		{name: "AddPartitionsToTxn: WRITE on the transactional id, then on the topic", oldTxn: true,
			req: func() kmsg.Request {
				r := kmsg.NewPtrAddPartitionsToTxnRequest()
				r.TransactionalID, r.ProducerID, r.ProducerEpoch = "tx", 1, 0
				r.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: "orders", Partitions: []int32{0}}}
				return r
			},
			code: func(r kmsg.Response) int16 {
				return r.(*kmsg.AddPartitionsToTxnResponse).Topics[0].Partitions[0].ErrorCode
			},
			stages: []authStage{{acls(topicWrite), kerr.TransactionalIDAuthorizationFailed.Code}, {acls(txnWrite), kerr.TopicAuthorizationFailed.Code},
				{acls(txnWrite, topicWrite), notAuthFailure}}},
		{name: "AddOffsetsToTxn: WRITE on the transactional id, READ on the group",
			req: func() kmsg.Request {
				r := kmsg.NewPtrAddOffsetsToTxnRequest()
				r.TransactionalID, r.ProducerID, r.ProducerEpoch, r.Group = "tx", 1, 0, "app"
				return r
			},
			code: func(r kmsg.Response) int16 { return r.(*kmsg.AddOffsetsToTxnResponse).ErrorCode },
			stages: []authStage{{acls(groupRead), kerr.TransactionalIDAuthorizationFailed.Code}, {acls(txnWrite), kerr.GroupAuthorizationFailed.Code},
				{acls(txnWrite, groupRead), notAuthFailure}}},
		{name: "TxnOffsetCommit: WRITE on the transactional id, READ on the group and the topic",
			req: func() kmsg.Request {
				r := kmsg.NewPtrTxnOffsetCommitRequest()
				r.TransactionalID, r.ProducerID, r.ProducerEpoch, r.Group, r.Generation = "tx", 1, 0, "app", -1
				r.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: "orders", Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1, LeaderEpoch: -1}}}}
				return r
			},
			code: func(r kmsg.Response) int16 {
				return r.(*kmsg.TxnOffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
			},
			stages: []authStage{{acls(groupRead, topicRead), kerr.TransactionalIDAuthorizationFailed.Code},
				{acls(txnWrite, topicRead), kerr.GroupAuthorizationFailed.Code}, {acls(txnWrite, groupRead), kerr.TopicAuthorizationFailed.Code},
				{acls(txnWrite, groupRead, topicRead), notAuthFailure}}},
		{name: "EndTxn: WRITE on the transactional id",
			req: func() kmsg.Request {
				r := kmsg.NewPtrEndTxnRequest()
				r.TransactionalID, r.ProducerID, r.ProducerEpoch = "tx", 1, 0
				return r
			},
			code:   func(r kmsg.Response) int16 { return r.(*kmsg.EndTxnResponse).ErrorCode },
			stages: []authStage{{nil, kerr.TransactionalIDAuthorizationFailed.Code}, {acls(txnWrite), notAuthFailure}}},
		{name: "WriteTxnMarkers: CLUSTER_ACTION on the cluster",
			req: func() kmsg.Request {
				r := kmsg.NewPtrWriteTxnMarkersRequest()
				r.Markers = []kmsg.WriteTxnMarkersRequestMarker{{ProducerID: 1, ProducerEpoch: 0, CoordinatorEpoch: 0,
					Topics: []kmsg.WriteTxnMarkersRequestMarkerTopic{{Topic: "orders", Partitions: []int32{0}}}}}
				return r
			},
			code: func(r kmsg.Response) int16 {
				return r.(*kmsg.WriteTxnMarkersResponse).Markers[0].Topics[0].Partitions[0].ErrorCode
			},
			stages: []authStage{{acls(cluster(kmsg.ACLOperationAlter)), kerr.ClusterAuthorizationFailed.Code},
				{acls(cluster(kmsg.ACLOperationClusterAction)), notAuthFailure}}},
		{name: "DescribeTransactions: DESCRIBE on the transactional id",
			req: func() kmsg.Request {
				r := kmsg.NewPtrDescribeTransactionsRequest()
				r.TransactionalIDs = []string{"tx"}
				return r
			},
			code: func(r kmsg.Response) int16 {
				return r.(*kmsg.DescribeTransactionsResponse).TransactionStates[0].ErrorCode
			},
			stages: []authStage{{nil, kerr.TransactionalIDAuthorizationFailed.Code},
				{acls(allowACL(aclTxnID, "tx", kmsg.ACLOperationDescribe)), notAuthFailure}}},
		{name: "DescribeAcls: DESCRIBE on the cluster",
			req: func() kmsg.Request {
				r := kmsg.NewPtrDescribeACLsRequest()
				r.ResourceType, r.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
				r.Operation, r.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
				return r
			},
			code:   func(r kmsg.Response) int16 { return r.(*kmsg.DescribeACLsResponse).ErrorCode },
			stages: []authStage{{nil, kerr.ClusterAuthorizationFailed.Code}, {acls(cluster(kmsg.ACLOperationDescribe)), 0}}},
		{name: "CreateAcls: ALTER on the cluster",
			req: func() kmsg.Request {
				r := kmsg.NewPtrCreateACLsRequest()
				r.Creations = []kmsg.CreateACLsRequestCreation{{ResourceType: kmsg.ACLResourceTypeTopic, ResourceName: "mine",
					ResourcePatternType: kmsg.ACLResourcePatternTypeLiteral, Principal: "User:alice", Host: "*",
					Operation: kmsg.ACLOperationRead, PermissionType: kmsg.ACLPermissionTypeAllow}}
				return r
			},
			code:   func(r kmsg.Response) int16 { return r.(*kmsg.CreateACLsResponse).Results[0].ErrorCode },
			stages: []authStage{{acls(cluster(kmsg.ACLOperationDescribe)), kerr.ClusterAuthorizationFailed.Code}, {acls(cluster(kmsg.ACLOperationAlter)), 0}}},
		{name: "DeleteAcls: ALTER on the cluster",
			req: func() kmsg.Request {
				r := kmsg.NewPtrDeleteACLsRequest()
				r.Filters = []kmsg.DeleteACLsRequestFilter{{ResourceType: kmsg.ACLResourceTypeTopic, ResourceName: str("mine"),
					ResourcePatternType: kmsg.ACLResourcePatternTypeLiteral, Operation: kmsg.ACLOperationAny, PermissionType: kmsg.ACLPermissionTypeAny}}
				return r
			},
			code:   func(r kmsg.Response) int16 { return r.(*kmsg.DeleteACLsResponse).Results[0].ErrorCode },
			stages: []authStage{{acls(cluster(kmsg.ACLOperationDescribe)), kerr.ClusterAuthorizationFailed.Code}, {acls(cluster(kmsg.ACLOperationAlter)), 0}}},
	}

	node := b.Config.NodeID
	for _, tc := range cases {
		for i, st := range tc.stages {
			setACLs(t, md, st.grant)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			cl := alice
			if tc.oldTxn {
				cl = oldAlice
			}
			if tc.asPeer {
				cl = peerAlice
			}
			resp, err := cl.Broker(int(node)).Request(ctx, tc.req())
			cancel()
			if err != nil {
				t.Errorf("%s, stage %d: %v", tc.name, i, err)
				continue
			}
			got := tc.code(resp)
			switch {
			case st.want == notAuthFailure && slices.Contains(authCodes, got):
				t.Errorf("%s, stage %d (granted %s): %s, want past the authorizer", tc.name, i, describeGrants(st.grant), codeName(got))
			case st.want != notAuthFailure && got != st.want:
				t.Errorf("%s, stage %d (granted %s): %s, want %s", tc.name, i, describeGrants(st.grant), codeName(got), codeName(st.want))
			}
		}
	}
}

// TestAuthorizationFilters: what lists answers with shows only what the
// principal may describe (Metadata of all topics, ListGroups,
// ListTransactions), and the authorized operations are the principal's.
func TestAuthorizationFilters(t *testing.T) {
	b, admin, alice := authBroker(t)
	md := b.Server().Metadata()
	node := b.Config.NodeID
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	init := kmsg.NewPtrInitProducerIDRequest()
	init.TransactionalID, init.TransactionTimeoutMillis = kmsg.StringPtr("tx"), 10000
	if resp, err := init.RequestWith(ctx, admin); err != nil || resp.ErrorCode != 0 {
		t.Fatalf("init producer id as admin: %v %+v", err, resp)
	}
	send := func(req kmsg.Request) kmsg.Response {
		t.Helper()
		resp, err := alice.Broker(int(node)).Request(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	listed := func() (topics, groups, txns []string, topicOps, clusterOps int32) {
		meta := kmsg.NewPtrMetadataRequest()
		meta.IncludeTopicAuthorizedOperations = true
		mr := send(meta).(*kmsg.MetadataResponse)
		dc := kmsg.NewPtrDescribeClusterRequest()
		dc.IncludeClusterAuthorizedOperations = true
		clusterOps = send(dc).(*kmsg.DescribeClusterResponse).ClusterAuthorizedOperations
		for _, tp := range mr.Topics {
			topics = append(topics, *tp.Topic)
			if *tp.Topic == "orders" {
				topicOps = tp.AuthorizedOperations
			}
		}
		for _, g := range send(kmsg.NewPtrListGroupsRequest()).(*kmsg.ListGroupsResponse).Groups {
			groups = append(groups, g.Group)
		}
		for _, x := range send(kmsg.NewPtrListTransactionsRequest()).(*kmsg.ListTransactionsResponse).TransactionStates {
			txns = append(txns, x.TransactionalID)
		}
		return
	}
	setACLs(t, md, nil)
	if topics, groups, txns, _, clusterOps := listed(); len(topics)+len(groups)+len(txns) > 0 || clusterOps != 0 {
		t.Fatalf("without ACLs alice sees topics %v, groups %v, transactions %v, cluster operations %b", topics, groups, txns, clusterOps)
	}
	setACLs(t, md, []model.ACLBinding{allowACL(aclTopic, "orders", kmsg.ACLOperationRead), allowACL(aclGroup, "app", kmsg.ACLOperationDescribe),
		allowACL(aclTxnID, "tx", kmsg.ACLOperationDescribe), allowACL(aclClust, "kafka-cluster", kmsg.ACLOperationCreate)})
	topics, groups, txns, topicOps, clusterOps := listed()
	if !slices.Equal(topics, []string{"orders"}) || !slices.Equal(groups, []string{"app"}) || !slices.Equal(txns, []string{"tx"}) {
		t.Fatalf("with ACLs alice sees topics %v, groups %v, transactions %v", topics, groups, txns)
	}
	if want := int32(1<<kmsg.ACLOperationRead | 1<<kmsg.ACLOperationDescribe); topicOps != want {
		t.Errorf("topic authorized operations %b, want %b", topicOps, want)
	}
	if want := int32(1 << kmsg.ACLOperationCreate); clusterOps != want {
		t.Errorf("cluster authorized operations %b, want %b", clusterOps, want)
	}
	// DESCRIBE on the cluster lists every group.
	setACLs(t, md, []model.ACLBinding{allowACL(aclClust, "kafka-cluster", kmsg.ACLOperationDescribe)})
	if _, groups, _, _, _ := listed(); !slices.Contains(groups, "app") {
		t.Fatalf("with DESCRIBE on the cluster alice sees groups %v", groups)
	}
}

// setACLs replaces every ACL with want.
func setACLs(t *testing.T, md *cluster.Store, want []model.ACLBinding) {
	t.Helper()
	cur, _ := md.ACLs()
	if err := md.AlterACLs(want, cur); err != nil {
		t.Fatal(err)
	}
}

func produceOne(topic string) kmsg.Request {
	return produceRequest(9, -1, topic, 0, makeBatch("x"))
}

func describeConfigs(typ kmsg.ConfigResourceType, name string) kmsg.Request {
	r := kmsg.NewPtrDescribeConfigsRequest()
	r.Resources = []kmsg.DescribeConfigsRequestResource{{ResourceType: typ, ResourceName: name}}
	return r
}

func findCoordinatorCode(r kmsg.Response) int16 {
	resp := r.(*kmsg.FindCoordinatorResponse)
	if len(resp.Coordinators) > 0 {
		return resp.Coordinators[0].ErrorCode
	}
	return resp.ErrorCode
}

func codeName(code int16) string {
	if code == 0 {
		return "NONE"
	}
	if err := kerr.ErrorForCode(code); err != nil {
		return err.Error()
	}
	return fmt.Sprint(code)
}

func describeGrants(xs []model.ACLBinding) string {
	if len(xs) == 0 {
		return "nothing"
	}
	var parts []string
	for _, x := range xs {
		perm := "allow"
		if x.Permission == int8(kmsg.ACLPermissionTypeDeny) {
			perm = "deny"
		}
		parts = append(parts, fmt.Sprintf("%s %s %s %q", perm, kmsg.ACLOperation(x.Operation), kmsg.ACLResourceType(x.ResourceType), x.ResourceName))
	}
	return strings.Join(parts, ", ")
}

// TestACLAdmin: ACLs are created (a bad one refused with Kafka's
// INVALID_REQUEST, the others kept), described by filter, grouped by
// resource pattern, and deleted by filter, through kadm as an admin tool
// does; a broker without an authorizer answers SECURITY_DISABLED.
func TestACLAdmin(t *testing.T) {
	_, admin, _ := authBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(admin)
	good := kadm.NewACLs().Allow("User:alice").Topics("orders").Operations(kadm.OpRead, kadm.OpDescribe).
		ResourcePatternType(kadm.ACLPatternLiteral)
	prefixed := kadm.NewACLs().Deny("User:bob").Topics("ord").Operations(kadm.OpWrite).ResourcePatternType(kadm.ACLPatternPrefixed)
	for _, b := range []*kadm.ACLBuilder{good, prefixed} {
		res, err := adm.CreateACLs(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Err != nil {
				t.Fatalf("creating %+v: %v", r, r.Err)
			}
		}
	}
	// A principal without a type is refused as Kafka refuses it.
	bad := kmsg.NewPtrCreateACLsRequest()
	bad.Creations = []kmsg.CreateACLsRequestCreation{{ResourceType: kmsg.ACLResourceTypeTopic, ResourceName: "x",
		ResourcePatternType: kmsg.ACLResourcePatternTypeLiteral, Principal: "alice", Host: "*",
		Operation: kmsg.ACLOperationRead, PermissionType: kmsg.ACLPermissionTypeAllow}}
	if resp, err := bad.RequestWith(ctx, admin); err != nil || resp.Results[0].ErrorCode != kerr.InvalidRequest.Code ||
		resp.Results[0].ErrorMessage == nil || !strings.Contains(*resp.Results[0].ErrorMessage, "no colon") {
		t.Fatalf("a principal without a type: %v %+v", err, resp)
	}

	describe := func(f *kmsg.DescribeACLsRequest) *kmsg.DescribeACLsResponse {
		t.Helper()
		resp, err := f.RequestWith(ctx, admin)
		if err != nil || resp.ErrorCode != 0 {
			t.Fatalf("describe: %v %+v", err, resp)
		}
		return resp
	}
	all := kmsg.NewPtrDescribeACLsRequest()
	all.ResourceType, all.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
	all.Operation, all.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	got := describe(all)
	if len(got.Resources) != 2 || got.Resources[0].ResourceName != "ord" || len(got.Resources[1].ACLs) != 2 {
		t.Fatalf("all ACLs: %+v", got.Resources)
	}
	// MATCH finds what applies to the topic orders: its literal entries
	// and the prefix ord.
	match := *all
	match.ResourceType, match.ResourceName, match.ResourcePatternType = kmsg.ACLResourceTypeTopic, kmsg.StringPtr("orders"), kmsg.ACLResourcePatternTypeMatch
	if got := describe(&match); len(got.Resources) != 2 {
		t.Fatalf("MATCH orders: %+v", got.Resources)
	}
	// A literal filter of another name finds nothing.
	other := match
	other.ResourceName, other.ResourcePatternType = kmsg.StringPtr("order"), kmsg.ACLResourcePatternTypeLiteral
	if got := describe(&other); len(got.Resources) != 0 {
		t.Fatalf("literal order: %+v", got.Resources)
	}

	del := kmsg.NewPtrDeleteACLsRequest()
	del.Filters = []kmsg.DeleteACLsRequestFilter{{ResourceType: kmsg.ACLResourceTypeTopic, ResourcePatternType: kmsg.ACLResourcePatternTypeAny,
		Principal: kmsg.StringPtr("User:alice"), Operation: kmsg.ACLOperationAny, PermissionType: kmsg.ACLPermissionTypeAllow}}
	if resp, err := del.RequestWith(ctx, admin); err != nil || resp.Results[0].ErrorCode != 0 || len(resp.Results[0].MatchingACLs) != 2 {
		t.Fatalf("deleting alice's: %v %+v", err, resp)
	}
	if got := describe(all); len(got.Resources) != 1 || got.Resources[0].ACLs[0].Principal != "User:bob" {
		t.Fatalf("after the deletion: %+v", got.Resources)
	}

	plain := testutil.StartBroker(t, nil)
	cl, err := kgo.NewClient(kgo.SeedBrokers(plain.Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if resp, err := all.RequestWith(ctx, cl); err != nil || resp.ErrorCode != kerr.SecurityDisabled.Code {
		t.Fatalf("without an authorizer: %v %+v", err, resp)
	}
}

// TestCertificatePrincipal: on a mutual TLS listener the principal is the
// client certificate's subject, as Kafka's default principal builder
// names it (User:CN=client-1); a client without a certificate is
// ANONYMOUS, and the ACLs of the certificate's principal do not apply to
// it.
func TestCertificatePrincipal(t *testing.T) {
	files := testutil.NewTLSFiles(t)
	b := sslBroker(t, files, func(c *config.Broker) {
		c.SSLClientAuth, c.SSLTruststore = "requested", files.CA
		c.Authorizer = "acl"
	})
	md := b.Server().Metadata()
	if _, err := md.CreateTopic(cluster.TopicSpec{Name: "orders", Partitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	produce := func(withCert bool) int16 {
		t.Helper()
		cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.DialTLSConfig(files.ClientConfig(t, files.CA, withCert)),
			kgo.RequestRetries(0))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := cl.Broker(int(b.Config.NodeID)).Request(ctx, produceOne("orders"))
		if err != nil {
			t.Fatal(err)
		}
		return resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode
	}
	if code := produce(true); code != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("without an ACL the certificate's principal got %s", codeName(code))
	}
	grant := allowACL(aclTopic, "orders", kmsg.ACLOperationWrite)
	grant.Principal = "User:CN=client-1"
	setACLs(t, md, []model.ACLBinding{grant})
	if code := produce(true); code != 0 {
		t.Fatalf("with an ACL for User:CN=client-1 the client's certificate got %s", codeName(code))
	}
	if code := produce(false); code != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("a client without a certificate got %s with User:CN=client-1's ACL", codeName(code))
	}
}
