package protocol

import (
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/quota"
)

// What the handlers do for client quotas (internal/quota): count a
// request's use against its user's and client id's quota and answer the
// throttle time; the server then reads nothing more from the connection
// for that long (KIP-219).

// quotaUser is the user a quota names for the request: its principal's
// name (ANONYMOUS when it did not authenticate).
func (r *Request) QuotaUser() string {
	_, name, _ := strings.Cut(r.principal(), ":")
	return name
}

// throttle counts amount of kind for the request's client and returns its
// throttle time.
func (b *Broker) throttle(r *Request, kind quota.Kind, amount float64) time.Duration {
	if !b.Quotas.Active() {
		return 0
	}
	return b.Quotas.Record(kind, r.QuotaUser(), r.ClientID, amount, time.Now())
}

// SetThrottle raises a response's throttle time to d, when it has one.
// Exported for the server, which adds the request-time quota's.
func SetThrottle(body kmsg.Response, d time.Duration) {
	tr, ok := body.(interface {
		kmsg.ThrottleResponse
		kmsg.SetThrottleResponse
	})
	if !ok || d <= 0 {
		return
	}
	if ms := int32(min(d.Milliseconds(), int64(^uint32(0)>>1))); ms > 0 {
		cur, _ := tr.Throttle()
		tr.SetThrottle(max(cur, ms))
	}
}

// mutationGate is a request's controller_mutation_rate check (KIP-599):
// before each topic, a client already over its quota is refused with
// THROTTLING_QUOTA_EXCEEDED when its version knows that error (else the
// topic goes ahead and the answer is only throttled), and the partitions
// each topic creates or deletes are counted.
type mutationGate struct {
	b      *Broker
	r      *Request
	strict bool
	owed   time.Duration
}

func (b *Broker) mutations(r *Request, strict bool) *mutationGate {
	return &mutationGate{b: b, r: r, strict: strict}
}

// refused is the error for the next topic, nil when it may go ahead.
func (g *mutationGate) refused() error {
	if !g.b.Quotas.Active() {
		return nil
	}
	d := g.b.Quotas.Owed(quota.Mutation, g.r.QuotaUser(), g.r.ClientID, time.Now())
	g.owed = max(g.owed, d)
	if d > 0 && g.strict {
		return newAPIError(kerr.ThrottlingQuotaExceeded, "The throttling quota has been exceeded.")
	}
	return nil
}

// count counts partitions created or deleted.
func (g *mutationGate) count(partitions int) {
	if partitions > 0 {
		g.owed = max(g.owed, g.b.throttle(g.r, quota.Mutation, float64(partitions)))
	}
}

// finish gives the answer the time the client owes.
func (g *mutationGate) finish(body kmsg.Response) { SetThrottle(body, g.owed) }
