package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// reachTimeout bounds how long a tool tries to reach a cluster before it
// says it cannot: a refused connection fails at once, a silent address
// after this long. Kafka's clients wait as long for a connection
// (socket.connection.setup.timeout.max.ms is longer, but per attempt).
const reachTimeout = 10 * time.Second

// connect is every tool's client of the cluster the flag (--brokers), the
// environment or the profile names, with extra options: returned once one
// of the bootstrap brokers has answered, or an error naming them within
// reachTimeout. Without this first request a client would retry an
// unreachable cluster for as long as each request may take (30 s and
// more), and a tool that reports as it goes (migrate watch) would go on
// with nothing to report.
func connect(ctx context.Context, flag string, extra ...kgo.Opt) (*kgo.Client, error) {
	c, err := clusterOpts(flag)
	if err != nil {
		return nil, err
	}
	opts := append(append(c.opts, kgo.DialTimeout(reachTimeout)), extra...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	pingCtx, cancel := context.WithTimeout(ctx, reachTimeout)
	defer cancel()
	if err := cl.Ping(pingCtx); err != nil {
		cl.Close()
		var refused *kerr.Error
		switch {
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case errors.As(err, &refused):
			// It answered, with an error: authentication, most often.
			return nil, fmt.Errorf("the cluster at %s (%s) refused the client: %w", strings.Join(c.seeds, ","), c.from, err)
		}
		return nil, fmt.Errorf("cannot reach the cluster at %s (%s): %w", strings.Join(c.seeds, ","), c.from, err)
	}
	return cl, nil
}
