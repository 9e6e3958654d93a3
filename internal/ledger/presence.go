package ledger

import (
	"fmt"
	"math"
	"time"
)

// The states of a presence entry (the group coordinator's steps of a
// member's presence; see doc.go).
const (
	PresenceLost     = "connection-lost"
	PresenceFetching = "still-fetching"
	PresenceReturned = "returned"
	PresenceRemoved  = "removed"
)

// Holds is which members of a group are held after their connection
// closed: by member id, the presence entry that started the hold or its
// latest step. Learn it a group's entries in time order.
type Holds map[string]Entry

// Learn takes in one entry; entries of other types are ignored.
func (h Holds) Learn(e Entry) {
	if e.Type != TypePresence || e.To.MemberID == "" {
		return
	}
	switch e.State {
	case PresenceLost, PresenceFetching:
		h[e.To.MemberID] = e
	default:
		delete(h, e.To.MemberID)
	}
}

// Status says why member id is held at now, as the tools show it beside
// the member ("connection lost, removed in 2s"); "" when it is not held.
func (h Holds) Status(id string, now time.Time) string {
	e, ok := h[id]
	if !ok {
		return ""
	}
	if e.State == PresenceFetching {
		return "connection lost, kept: still fetching on " + e.Connection
	}
	if e.RemoveAt == nil || !e.RemoveAt.After(now) {
		return "connection lost, being removed"
	}
	return fmt.Sprintf("connection lost, removed in %ds", int(math.Ceil(e.RemoveAt.Sub(now).Seconds())))
}

// PresenceLine is a presence entry as a list of events shows it, after the
// member's name.
func PresenceLine(e Entry) string {
	switch e.State {
	case PresenceLost:
		at := "soon"
		if e.RemoveAt != nil {
			at = "at " + e.RemoveAt.Local().Format("15:04:05.000")
		}
		return fmt.Sprintf("connection %s lost without a LeaveGroup: removed %s unless it returns", e.Connection, at)
	case PresenceFetching:
		return "connection lost but still fetching on " + e.Connection + ": kept while it fetches"
	case PresenceReturned:
		return "returned on " + e.Connection + ": keeps its place"
	case PresenceRemoved:
		return "removed: it did not return within the grace"
	}
	return e.State
}
