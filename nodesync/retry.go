package nodesync

import (
	"context"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/vswitchkit/vswitchkit/internal/retry"
)

// maxRetryBackoff caps the backoff between failed DB requests.
const maxRetryBackoff = 2 * time.Second

// newBackoff returns the backoff between failed DB requests: from
// Config.RetryBackoff, doubling up to 2s, with ±50% jitter, so that nodes
// whose requests failed together (an etcd restart, a storm of requests
// timing out) do not retry together.
func (ns *NodeSync) newBackoff() *backoff.ExponentialBackOff {
	return retry.NewClientBackoff(ns.cfg.RetryBackoff, maxRetryBackoff)
}

// retryDB calls op until it succeeds, returns a backoff.Permanent error or
// ctx ends, waiting newBackoff between failed attempts. The failures are
// logged when they start and when they end, not per attempt (CONTRIBUTING
// R10); what names the operation, e.g. "allocating the node ID".
func retryDB[T any](ctx context.Context, ns *NodeSync, what string, op backoff.Operation[T]) (T, error) {
	deg := retry.NewDegraded(ns.log, what)
	v, err := backoff.Retry(ctx, op, backoff.WithBackOff(ns.newBackoff()), backoff.WithMaxElapsedTime(0), backoff.WithNotify(deg.Fail))
	if err == nil {
		deg.OK()
	}
	return v, err
}
