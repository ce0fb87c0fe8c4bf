package reflector

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/internal/cfgutil"
)

// Defaults of [Config] fields.
const (
	// DefaultPrefix is the Kubernetes-state prefix that the etcd watcher
	// (watcher) reads by default.
	DefaultPrefix = kubemodel.DefaultPrefix
	// DefaultElectionPrefix is the prefix of the leader-election keys.
	DefaultElectionPrefix = "/vswitchkit/reflector/leader"
	// DefaultBatchSize is etcd's default limit of operations per
	// transaction (--max-txn-ops).
	DefaultBatchSize       = 128
	DefaultSessionTTL      = 10 * time.Second
	DefaultWriteTimeout    = 10 * time.Second
	DefaultRetryMinBackoff = 100 * time.Millisecond
	DefaultRetryMaxBackoff = 5 * time.Second
	// DefaultAPIRetryMaxBackoff is the default of
	// Config.APIRetryMaxBackoff.
	DefaultAPIRetryMaxBackoff = time.Second
)

// maxTxnBytes bounds the size of the values in one transaction, well below
// etcd's default request limit of 1.5 MiB (--max-request-bytes). A single
// larger value goes alone.
const maxTxnBytes = 1 << 20

// maxInflight is the number of write transactions a commit keeps in
// flight at once.
const maxInflight = 8

// readPageSize is the number of keys read per request when the reconcile
// reads a resource's keys from etcd.
const readPageSize = 5000

// Config configures a [Reflector]. The zero value is valid: it reflects
// under [DefaultPrefix], elects its leader under [DefaultElectionPrefix]
// and writes at most [DefaultBatchSize] operations per transaction.
//
// Config is a plain value; a copy is safe for concurrent use.
type Config struct {
	// Prefix is the etcd key prefix of the Kubernetes state: the full key
	// of an object is Prefix + its relative key (for example
	// "/vswitchkit/" + kubemodel.PodKey("default", "web")). It must equal
	// the watcher's KubeStatePrefix. Default: [DefaultPrefix].
	Prefix string

	// ElectionPrefix is the etcd prefix under which the replicas elect
	// their leader (concurrency.Election); only the leader writes. It must
	// not lie under Prefix + a resource's key prefix. Default:
	// [DefaultElectionPrefix].
	ElectionPrefix string

	// Identity is the value this replica writes into its election key, to
	// tell operators which replica leads. Default: "<hostname>-<pid>",
	// determined when Run starts.
	Identity string

	// SessionTTL is the TTL of the lease that holds the election key,
	// rounded up to whole seconds. A leader that stops refreshing it (it
	// crashed, or is cut off from etcd) is replaced after at most this
	// long. Default: [DefaultSessionTTL].
	SessionTTL time.Duration

	// BatchSize is the largest number of operations in one etcd
	// transaction; it must not exceed the server's --max-txn-ops (128 by
	// default). Transactions are also kept below 1 MiB of values.
	// Default: [DefaultBatchSize].
	BatchSize int

	// WriteTimeout bounds one etcd request (a transaction, a page of a
	// reconcile read, a lease grant). A request that times out is retried
	// as a full reconcile. Default: [DefaultWriteTimeout].
	WriteTimeout time.Duration

	// RetryMinBackoff and RetryMaxBackoff bound the exponential backoff
	// (github.com/cenkalti/backoff/v5) between failed attempts to write,
	// to reconcile or to campaign. Defaults: [DefaultRetryMinBackoff],
	// [DefaultRetryMaxBackoff].
	RetryMinBackoff time.Duration
	RetryMaxBackoff time.Duration

	// APIRetryMaxBackoff bounds the backoff of the informers (client-go
	// reflectors) between attempts to list and watch: from
	// RetryMinBackoff, doubling, with 20% jitter, back to RetryMinBackoff
	// after two minutes without a failure. It applies after every failed
	// request (the API server is down, or answers 403 for a moment after
	// it started, before its RBAC state is loaded) and before every
	// re-list (a watch that got 410 Gone: a restarted API server cannot
	// resume watches from before its start). client-go's shared informers
	// fix it at 0.8 s doubling to 30 s, plus up to as much again of
	// jitter: a few API server restarts within two minutes grow it into
	// pauses of 25 to 50 s before changes flow again. The reflector is one
	// client per cluster, so retrying quickly costs the API server
	// little. Default: [DefaultAPIRetryMaxBackoff].
	APIRetryMaxBackoff time.Duration

	// Logger receives lifecycle messages (Info: started, elected, lost
	// leadership, reconciled), degraded states (Warn: etcd errors, bad
	// objects) and one Debug record per transaction. Values are never
	// logged. Default: discard.
	Logger *slog.Logger
}

// withDefaults fills in defaults and reports every bad field (the caller
// adds the package name).
func (c Config) withDefaults() (Config, error) {
	var errs []error
	if c.Prefix == "" {
		c.Prefix = DefaultPrefix
	}
	if !strings.HasSuffix(c.Prefix, "/") {
		errs = append(errs, fmt.Errorf("prefix %q (Prefix) must end in /", c.Prefix))
	}
	if c.ElectionPrefix == "" {
		c.ElectionPrefix = DefaultElectionPrefix
	}
	errs = append(errs, cfgutil.Ints([]cfgutil.Int{
		{Name: "BatchSize", Value: &c.BatchSize, Default: DefaultBatchSize},
	})...)
	errs = append(errs, cfgutil.Durations([]cfgutil.Duration{
		{Name: "SessionTTL", Value: &c.SessionTTL, Default: DefaultSessionTTL},
		{Name: "WriteTimeout", Value: &c.WriteTimeout, Default: DefaultWriteTimeout},
		{Name: "RetryMinBackoff", Value: &c.RetryMinBackoff, Default: DefaultRetryMinBackoff},
		{Name: "RetryMaxBackoff", Value: &c.RetryMaxBackoff, Default: DefaultRetryMaxBackoff},
		{Name: "APIRetryMaxBackoff", Value: &c.APIRetryMaxBackoff, Default: DefaultAPIRetryMaxBackoff},
	})...)
	if c.RetryMaxBackoff < c.RetryMinBackoff {
		errs = append(errs, fmt.Errorf("RetryMaxBackoff %v is less than RetryMinBackoff %v", c.RetryMaxBackoff, c.RetryMinBackoff))
	}
	if c.APIRetryMaxBackoff < c.RetryMinBackoff {
		errs = append(errs, fmt.Errorf("APIRetryMaxBackoff %v is less than RetryMinBackoff %v", c.APIRetryMaxBackoff, c.RetryMinBackoff))
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if err := errors.Join(errs...); err != nil {
		return c, fmt.Errorf("config: %w", err)
	}
	return c, nil
}

// sessionTTLSeconds is the lease TTL in whole seconds, rounded up.
func (c Config) sessionTTLSeconds() int {
	s := int((c.SessionTTL + time.Second - 1) / time.Second)
	return max(s, 1)
}
