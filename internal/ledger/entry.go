package ledger

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/strandlog/strand/internal/model"
)

// Topic is the ledger's internal topic.
const Topic = model.HandoffsTopic

// Version is the schema version entries are written with.
const Version = 1

// TypeHandoff is the type of a hand-off entry; TypeCommitNotOwned of a
// member's commit for a partition it does not own; TypePresence of a step
// in a member's presence (its group connection lost, its return).
const (
	TypeHandoff        = "handoff"
	TypeCommitNotOwned = "commit-not-owned"
	TypePresence       = "presence"
	// TypeLinkCommit is a commit a cluster link copied from the source
	// cluster: where the group stood there.
	TypeLinkCommit = "link-commit"
)

// Entry is one record of the ledger (see doc.go for the fields).
type Entry struct {
	V              int        `json:"v"`
	Type           string     `json:"type"`
	Time           time.Time  `json:"time"`
	Group          string     `json:"group"`
	Topic          string     `json:"topic"`
	Partition      int32      `json:"partition"`
	Generation     int32      `json:"generation"`
	From           *Member    `json:"from,omitempty"`
	To             Member     `json:"to"`
	Reason         string     `json:"reason,omitempty"`
	LostAt         *time.Time `json:"lost_at,omitempty"`
	Committed      int64      `json:"committed"`
	LastFetched    int64      `json:"last_fetched"`
	LastSent       int64      `json:"last_sent"`
	LastFetchedAt  *time.Time `json:"last_fetched_at,omitempty"`
	FirstFetched   int64      `json:"first_fetched"`
	FirstFetchedAt *time.Time `json:"first_fetched_at,omitempty"`
	LogStart       int64      `json:"log_start"`
	DuplicateRisk  int64      `json:"duplicate_risk"`
	Skipped        int64      `json:"skipped"`
	Rewound        int64      `json:"rewound"`
	UnownedMs      int64      `json:"unowned_ms"`
	// A commit-not-owned entry: who committed which offset, and the
	// partition's owner then (absent when nobody owned it).
	Committer *Member `json:"committer,omitempty"`
	Owner     *Member `json:"owner,omitempty"`
	Offset    *int64  `json:"offset,omitempty"`
	// A presence entry: the member (in To), the step, the connection, and
	// when it is removed unless heard from.
	State      string     `json:"state,omitempty"`
	Connection string     `json:"connection,omitempty"`
	RemoveAt   *time.Time `json:"remove_at,omitempty"`
	// A link-commit entry: the link and its source cluster, the source's
	// commit (Offset is what was committed here: the source's, or the
	// mirror's end when the mirror did not hold it yet), the source
	// partition's end then, and the members the group had at the source.
	Link          string `json:"link,omitempty"`
	Source        string `json:"source,omitempty"`
	SourceOffset  *int64 `json:"source_offset,omitempty"`
	SourceEnd     *int64 `json:"source_end,omitempty"`
	SourceMembers *int   `json:"source_members,omitempty"`
}

// Member is a group member as an entry names it.
type Member struct {
	MemberID        string `json:"member_id"`
	InstanceID      string `json:"instance_id,omitempty"`
	ClientID        string `json:"client_id"`
	Host            string `json:"host"`
	SoftwareName    string `json:"software_name,omitempty"`
	SoftwareVersion string `json:"software_version,omitempty"`
}

// Encode is an entry's record: the group id as key, the JSON as value.
func (e Entry) Encode() (key, value []byte) {
	e.V = Version
	v, err := json.Marshal(e)
	if err != nil {
		panic(fmt.Sprintf("ledger: encoding an entry: %v", err)) // only plain fields: cannot fail
	}
	return []byte(e.Group), v
}

// Decode reads an entry from a record's value.
func Decode(value []byte) (Entry, error) {
	var e Entry
	if err := json.Unmarshal(value, &e); err != nil {
		return Entry{}, fmt.Errorf("ledger: decoding an entry: %w", err)
	}
	if e.V < 1 || e.Type == "" {
		return Entry{}, fmt.Errorf("ledger: not an entry (version %d, type %q)", e.V, e.Type)
	}
	return e, nil
}
