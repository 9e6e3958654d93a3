package main

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// retriableFor bounds how long a tool asks again after retriable errors.
const retriableFor = 30 * time.Second

// fetchOffsets is a group's committed offsets, asked again while the
// cluster answers with a retriable error (a coordinator still loading, or
// __consumer_offsets just created), as Kafka's own tools wait.
func fetchOffsets(ctx context.Context, adm *kadm.Client, group string) (kadm.OffsetResponses, error) {
	deadline := time.Now().Add(retriableFor)
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		offs, err := adm.FetchOffsets(ctx, group)
		var ke *kerr.Error
		if err == nil || !errors.As(err, &ke) || !ke.Retriable || time.Now().After(deadline) {
			return offs, err
		}
		select {
		case <-ctx.Done():
			return offs, err
		case <-time.After(wait):
		}
	}
}
