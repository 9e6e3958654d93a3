package inspect

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kadm"
)

// ErrGroupActive refuses to move the offsets of a group with members, as
// Kafka's tool does: they would overwrite them.
var ErrGroupActive = errors.New("the group has members: stop them first")

// CheckEmpty says why group's offsets may not be moved: it has members.
func CheckEmpty(ctx context.Context, adm *kadm.Client, group string) error {
	g, err := ReadGroup(ctx, adm, group)
	if err != nil {
		return err
	}
	if len(g.Members) > 0 {
		return fmt.Errorf("group %s: %w", group, ErrGroupActive)
	}
	return nil
}

// ResetTargets is where a reset of group's offsets puts them, for every
// topic it has offsets for (or only topic): to is earliest, latest, or an
// offset (capped at each partition's end).
func ResetTargets(ctx context.Context, adm *kadm.Client, group, topic, to string) (kadm.Offsets, error) {
	cur, err := FetchOffsets(ctx, adm, group)
	if err != nil {
		return nil, err
	}
	topics := cur.Offsets().TopicsSet().Topics()
	if topic != "" {
		topics = []string{topic}
	}
	if len(topics) == 0 {
		return nil, fmt.Errorf("group %s has no offsets; name a topic", group)
	}
	var listed kadm.ListedOffsets
	switch to {
	case "earliest":
		listed, err = adm.ListStartOffsets(ctx, topics...)
	case "latest":
		listed, err = adm.ListEndOffsets(ctx, topics...)
	default:
		at, perr := strconv.ParseInt(to, 10, 64)
		if perr != nil || at < 0 {
			return nil, fmt.Errorf("reset to %q: earliest, latest or an offset", to)
		}
		listed, err = adm.ListEndOffsets(ctx, topics...)
		for t, ps := range listed {
			for p, o := range ps {
				o.Offset = min(at, o.Offset)
				listed[t][p] = o
			}
		}
	}
	if err != nil {
		return nil, err
	}
	if err := ListedError(listed); err != nil {
		return nil, err
	}
	return listed.Offsets(), nil
}
