package protocol

import (
	"strings"
	"time"

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
	if b.Quotas == nil {
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
