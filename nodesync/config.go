package nodesync

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"time"

	"github.com/vswitchkit/vswitchkit/internal/cfgutil"
)

// DefaultPrefix is the key prefix of the nodesync records when
// Config.Prefix is empty.
const DefaultPrefix = "/vswitchkit/nodesync/"

// Config holds the optional settings of a [NodeSync]. The zero value is
// valid: every field has a documented default. Config is a plain value,
// copied by New; it is safe for concurrent use as long as nobody modifies it.
type Config struct {
	// Prefix is the key prefix of the nodesync records in the cluster-wide
	// DB; it must end in "/". Every node of a cluster must use the same
	// prefix. Default: DefaultPrefix.
	Prefix string

	// Logger receives the log output. Default: discard.
	Logger *slog.Logger

	// RequestTimeout bounds each DB request made from the event loop
	// (PublishNodeIPs) and each list or write of the ID allocation.
	// Default: 10s.
	RequestTimeout time.Duration

	// ListTimeout bounds one request reading the node records (a page,
	// with a PageLister). It is longer than RequestTimeout because a read
	// that times out is repeated: when thousands of agents start at once,
	// etcd answers everyone slowly, and a short bound only makes it read
	// the same records again (5000 simulated agents: 14,787 pages read
	// twice with 10 s). Default: 30s.
	ListTimeout time.Duration

	// StartupTimeout bounds how long the start-up Resync waits for Run to
	// allocate the node ID; when it passes, Resync returns ErrNotReady (the
	// loop retries with a healing resync). A Run that has not been called
	// at all is reported sooner, after NotRunningDelay, with ErrNotRunning;
	// and the wait ends with the loop's context. Default: 2m.
	StartupTimeout time.Duration

	// MaxNodeID is the largest node ID that may be allocated; when all IDs
	// 1..MaxNodeID are taken, Run returns ErrNoFreeID. Default: math.MaxUint32.
	MaxNodeID uint32

	// RetryBackoff is the initial delay before a failed DB request of the
	// ID allocation or of the watch is retried; it doubles up to 2s (with
	// jitter). Lost allocation races are retried without delay. Default: 50ms.
	RetryBackoff time.Duration

	// InitialNodeIPs, when set, returns the VPP addresses this node will
	// publish, given its node ID (an agent's node-interconnect address,
	// which IPAM computes from the ID). They are written into the node's
	// record together with the claim of its ID, so that a joining node
	// writes its record once and every other node receives one watch
	// event per join instead of two (the claim, then PublishNodeIPs, which
	// then writes only if the addresses differ). An error, or addresses
	// that PublishNodeIPs would refuse, leave the record without
	// addresses until PublishNodeIPs. Default: nil, the record carries no
	// addresses until PublishNodeIPs.
	InitialNodeIPs func(id uint32) (IPsWithNetworks, error)

	// LocalState keeps this node's ID and the last snapshot of the node
	// records on the node, so that Run can start without the DB: when the
	// DB has not confirmed the ID within LocalFallbackDelay, Run starts with
	// the saved ID and records, and confirms the ID once the DB is back.
	// Default: nil (no local state: Run waits for the DB). [StateFile] keeps
	// it in a file.
	LocalState LocalState

	// LocalFallbackDelay is how long Run tries to confirm or allocate the ID
	// in the DB before it starts with the ID from LocalState. Default:
	// DefaultLocalFallbackDelay.
	LocalFallbackDelay time.Duration
}

// DefaultLocalFallbackDelay is the default of Config.LocalFallbackDelay, the
// same as the watcher's default delay before it falls back to its mirror.
const DefaultLocalFallbackDelay = 5 * time.Second

func (c Config) withDefaults() (Config, error) {
	var errs []error
	if c.Prefix == "" {
		c.Prefix = DefaultPrefix
	}
	if !strings.HasSuffix(c.Prefix, "/") {
		errs = append(errs, fmt.Errorf("prefix %q must end in /", c.Prefix))
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	errs = append(errs, cfgutil.Durations([]cfgutil.Duration{
		{Name: "RequestTimeout", Value: &c.RequestTimeout, Default: 10 * time.Second},
		{Name: "ListTimeout", Value: &c.ListTimeout, Default: 30 * time.Second},
		{Name: "StartupTimeout", Value: &c.StartupTimeout, Default: 2 * time.Minute},
		{Name: "RetryBackoff", Value: &c.RetryBackoff, Default: 50 * time.Millisecond},
		{Name: "LocalFallbackDelay", Value: &c.LocalFallbackDelay, Default: DefaultLocalFallbackDelay},
	})...)
	if c.MaxNodeID == 0 {
		c.MaxNodeID = math.MaxUint32
	}
	if err := errors.Join(errs...); err != nil {
		return c, fmt.Errorf("nodesync: invalid config: %w", err)
	}
	return c, nil
}
