package protocol

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/acl"
	"github.com/strandlog/strand/internal/txn"
)

// DescribeTransactions: v0 (Kafka 4.0's range)
//
// Behaviour: each transactional id's state as the coordinator holds it
// (state name, timeout, start time of the ongoing transaction or -1,
// producer id and epoch, partitions). An id the coordinator does not know
// is TRANSACTIONAL_ID_NOT_FOUND.
//
// Authorization: DESCRIBE on the transactional id
// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED); the topics the principal may not
// DESCRIBE are left out of the transaction's partitions.

func init() { register(65, 0, 0, handleDescribeTransactions) }

func handleDescribeTransactions(_ context.Context, b *Broker, r *Request) (*Response, error) {
	req := r.Body.(*kmsg.DescribeTransactionsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
	may := b.topicCheck(r, acl.Describe)
	for _, id := range req.TransactionalIDs {
		st := kmsg.NewDescribeTransactionsResponseTransactionState()
		st.TransactionalID = id
		st.StartTimestamp, st.ProducerID, st.ProducerEpoch = -1, -1, -1
		if !b.allowed(r, acl.Describe, acl.TransactionalID, id) {
			st.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
			resp.TransactionStates = append(resp.TransactionStates, st)
			continue
		}
		info, err := b.Txns.Describe(id)
		if err != nil {
			st.ErrorCode = errorCode(err)
			resp.TransactionStates = append(resp.TransactionStates, st)
			continue
		}
		st.State, st.TimeoutMillis = info.State, int32(info.Timeout.Milliseconds())
		if !info.Start.IsZero() {
			st.StartTimestamp = info.Start.UnixMilli()
		}
		st.ProducerID, st.ProducerEpoch = info.ProducerID, info.ProducerEpoch
		st.Topics = slices.DeleteFunc(describeTxnTopics(info), func(t kmsg.DescribeTransactionsResponseTransactionStateTopic) bool {
			return !may(t.Topic)
		})
		resp.TransactionStates = append(resp.TransactionStates, st)
	}
	return reply(resp)
}

// describeTxnTopics groups a transaction's partitions by topic.
func describeTxnTopics(info txn.TxnInfo) []kmsg.DescribeTransactionsResponseTransactionStateTopic {
	var out []kmsg.DescribeTransactionsResponseTransactionStateTopic
	index := map[string]int{}
	for _, tp := range info.Partitions {
		i, ok := index[tp.Topic]
		if !ok {
			t := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
			t.Topic = tp.Topic
			i = len(out)
			index[tp.Topic] = i
			out = append(out, t)
		}
		out[i].Partitions = append(out[i].Partitions, tp.Partition)
	}
	return out
}
