package protocol

import (
	"context"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/acl"
	"github.com/strandlog/strand/internal/txn"
)

// ListTransactions: v0-2
//
// Behaviour: the transactional ids the coordinator knows, with producer id
// and state, filtered by state names, producer ids, (v1+) a minimum running
// time of the ongoing transaction, and (v2+) a regular expression the whole
// id must match, as Java's Pattern.matches (INVALID_REGULAR_EXPRESSION when
// it does not compile). State
// filters that name no Kafka state are listed in UnknownStateFilters and
// ignored, as Kafka does.
//
// Authorization: only the transactional ids the principal may DESCRIBE are
// listed.

func init() { register(66, 0, 2, handleListTransactions) }

// txnStates are Kafka's transaction state names.
var txnStates = []string{"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort",
	"Dead", "PrepareEpochFence"}

func handleListTransactions(_ context.Context, b *Broker, r *Request) (*Response, error) {
	req := r.Body.(*kmsg.ListTransactionsRequest)
	resp := req.ResponseKind().(*kmsg.ListTransactionsResponse)
	f := txn.ListFilter{ProducerIDs: req.ProducerIDFilters}
	for _, s := range req.StateFilters {
		if slices.Contains(txnStates, s) {
			f.States = append(f.States, s)
		} else {
			resp.UnknownStateFilters = append(resp.UnknownStateFilters, s)
		}
	}
	if len(req.StateFilters) > 0 && len(f.States) == 0 {
		return reply(resp) // every filter unknown: nothing can match
	}
	if req.Version >= 1 && req.DurationFilterMillis >= 0 {
		f.MinDuration = time.Duration(req.DurationFilterMillis) * time.Millisecond
	}
	if req.Version >= 2 && req.TransactionalIDPattern != nil && *req.TransactionalIDPattern != "" {
		re, err := txn.CompileIDPattern(*req.TransactionalIDPattern)
		if err != nil {
			resp.ErrorCode = errorCode(errInvalidRegex)
			return reply(resp)
		}
		f.IDPattern = re
	}
	for _, t := range b.Txns.List(f) {
		if !b.allowed(r, acl.Describe, acl.TransactionalID, t.ID) {
			continue
		}
		st := kmsg.NewListTransactionsResponseTransactionState()
		st.TransactionalID, st.ProducerID, st.TransactionState = t.ID, t.ProducerID, t.State
		resp.TransactionStates = append(resp.TransactionStates, st)
	}
	return reply(resp)
}
