package bgpstatus

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	"github.com/vswitchkit/vswitchkit/bgp"
	"github.com/vswitchkit/vswitchkit/bgp/bgpmodel"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/internal/cfgutil"
	"github.com/vswitchkit/vswitchkit/internal/lifecycle"
	"github.com/vswitchkit/vswitchkit/internal/retry"
)

// ErrAlreadyRunning is returned (wrapped) by a second call of
// [Publisher.Run]; the same value as every package's ErrAlreadyRunning.
var ErrAlreadyRunning = lifecycle.ErrAlreadyRunning

// Defaults of [Config].
const (
	DefaultInterval         = 2 * time.Second
	DefaultMinWriteInterval = time.Second
	// MaxRetryInterval bounds the backoff between failed attempts (unless
	// Interval is longer).
	MaxRetryInterval = 30 * time.Second
)

// Source returns the node's BGP status; *bgp.Controller implements it. It
// is called from Run's goroutine and must honour ctx.
type Source interface {
	NodeStatus(ctx context.Context) (*bgp.NodeStatus, error)
}

// SourceFunc adapts a function into a [Source].
type SourceFunc func(ctx context.Context) (*bgp.NodeStatus, error)

var _ Source = SourceFunc(nil)

// NodeStatus calls f.
func (f SourceFunc) NodeStatus(ctx context.Context) (*bgp.NodeStatus, error) { return f(ctx) }

// Writer stores a value under a key; [EtcdWriter] is the etcd one. It is
// called from Run's goroutine and must honour ctx.
type Writer interface {
	Put(ctx context.Context, key string, value []byte) error
}

// WriterFunc adapts a function into a [Writer].
type WriterFunc func(ctx context.Context, key string, value []byte) error

var _ Writer = WriterFunc(nil)

// Put calls f.
func (f WriterFunc) Put(ctx context.Context, key string, value []byte) error {
	return f(ctx, key, value)
}

// EtcdWriter returns a [Writer] that puts into etcd through cli (which
// stays the caller's).
func EtcdWriter(cli *clientv3.Client) Writer {
	return WriterFunc(func(ctx context.Context, key string, value []byte) error {
		_, err := cli.Put(ctx, key, string(value))
		return err
	})
}

// Config configures a [Publisher]. The zero value is valid.
type Config struct {
	// Prefix is the etcd prefix of the statuses; the key is Prefix + node
	// name. Default: bgpmodel.DefaultStatusPrefix.
	Prefix string
	// Interval is how often the status is read (session states and route
	// counts change without a signal). Default (zero) [DefaultInterval];
	// negative is an error.
	Interval time.Duration
	// MinWriteInterval bounds the writes: a changed status is written at
	// most once per MinWriteInterval (later changes wait and coalesce).
	// Default (zero) [DefaultMinWriteInterval]; negative writes every
	// change at once.
	MinWriteInterval time.Duration
	// WriteTimeout bounds one read of the status and one write. Default
	// (zero) 10s; negative is an error.
	WriteTimeout time.Duration
	// Logger receives the publisher's logs: Warn when writes start failing
	// (once), Info when they succeed again, Debug per write. Default:
	// discard.
	Logger *slog.Logger
}

// Stats are the publisher's counters; a copy, safe for concurrent use.
type Stats struct {
	// Reads counts status reads; Writes the statuses written (changes);
	// Errors failed reads and writes.
	Reads, Writes, Errors uint64
	// LastWrite is when a status was last written; zero if never.
	LastWrite time.Time
}

// Publisher publishes a node's BGP status under its etcd key.
//
// Publisher is safe for concurrent use; see the package documentation.
type Publisher struct {
	node string
	src  Source
	w    Writer
	cfg  Config
	key  string
	log  *slog.Logger
	run  lifecycle.Once

	mu    sync.Mutex // guards the fields below
	last  *bgp.NodeStatus
	stats Stats
}

// New returns a publisher of the status of the node named node, read from
// src and written with w. It validates cfg, does no I/O and starts no
// goroutine.
func New(node string, src Source, w Writer, cfg Config) (*Publisher, error) {
	var errs []error
	if err := kubemodel.ValidateName(node); err != nil {
		errs = append(errs, fmt.Errorf("bgpstatus: node name: %w", err))
	}
	if src == nil {
		errs = append(errs, errors.New("bgpstatus: New: source is nil"))
	}
	if w == nil {
		errs = append(errs, errors.New("bgpstatus: New: writer is nil"))
	}
	for _, err := range cfgutil.Durations([]cfgutil.Duration{
		{Name: "Interval", Value: &cfg.Interval, Default: DefaultInterval},
		{Name: "MinWriteInterval", Value: &cfg.MinWriteInterval, Default: DefaultMinWriteInterval, Off: true},
		{Name: "WriteTimeout", Value: &cfg.WriteTimeout, Default: 10 * time.Second},
	}) {
		errs = append(errs, fmt.Errorf("bgpstatus: Config.%w", err))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Publisher{node: node, src: src, w: w, cfg: cfg, key: bgpmodel.StatusKey(cfg.Prefix, node),
		log: log.With(slog.String("component", "bgp-status"))}, nil
}

// Key returns the etcd key the publisher writes.
func (p *Publisher) Key() string { return p.key }

// Last returns the status read last (nil before the first read). It is
// shared: read-only.
func (p *Publisher) Last() *bgp.NodeStatus {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.last
}

// Stats returns the counters.
func (p *Publisher) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

// Run reads the status every Interval and writes it when its encoding
// changed, at most once per MinWriteInterval, until ctx ends; then it
// returns ctx.Err(). Failed reads and writes are retried after a jittered
// exponential backoff, from Interval up to [MaxRetryInterval] (or
// Interval, if longer), so that the publishers of a cluster's nodes do not
// hammer an etcd that is down or overloaded every Interval, in step; they
// are logged at Warn when they start and at Info when they stop, and
// counted in [Stats]. A second call returns an error wrapping
// [ErrAlreadyRunning].
func (p *Publisher) Run(ctx context.Context) error {
	if err := p.run.Start("bgpstatus"); err != nil {
		return err
	}
	p.log.Info("started", slog.String("key", p.key))
	bo := retry.NewClientBackoff(p.cfg.Interval, max(MaxRetryInterval, p.cfg.Interval))
	var st pubState
	var failing error
	for {
		err := p.step(ctx, &st)
		if ctx.Err() != nil {
			p.log.Info("stopped")
			return ctx.Err()
		}
		wait := p.cfg.Interval
		switch {
		case err != nil:
			wait = bo.NextBackOff()
			p.mu.Lock()
			p.stats.Errors++
			p.mu.Unlock()
			if failing == nil || failing.Error() != err.Error() {
				p.log.Warn("cannot publish the BGP status; retrying", slog.Any("error", err), slog.Duration("in", wait))
			}
			failing = err
		case failing != nil:
			failing = nil
			bo.Reset()
			p.log.Info("publishing the BGP status again")
		}
		if retry.Sleep(ctx, wait) != nil {
			p.log.Info("stopped")
			return ctx.Err()
		}
	}
}

// pubState is what Run knows of the key; owned by Run's goroutine.
type pubState struct {
	written   []byte // the value in etcd, as far as we know
	lastWrite time.Time
}

// step reads the status and writes it if it changed, waiting for
// MinWriteInterval since the last write first (and reading again then).
func (p *Publisher) step(ctx context.Context, st *pubState) error {
	value, err := p.read(ctx)
	if err != nil || bytes.Equal(value, st.written) {
		return err
	}
	if wait := p.cfg.MinWriteInterval - time.Since(st.lastWrite); !st.lastWrite.IsZero() && wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		if value, err = p.read(ctx); err != nil || bytes.Equal(value, st.written) {
			return err
		}
	}
	if err := p.write(ctx, value); err != nil {
		return err
	}
	st.written, st.lastWrite = value, time.Now()
	return nil
}

// read reads the status and encodes it deterministically.
func (p *Publisher) read(ctx context.Context) ([]byte, error) {
	rctx, cancel := context.WithTimeout(ctx, p.cfg.WriteTimeout)
	defer cancel()
	st, err := p.src.NodeStatus(rctx)
	p.mu.Lock()
	p.stats.Reads++
	if err == nil {
		p.last = st
	}
	p.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("bgpstatus: read the status: %w", err)
	}
	m := bgp.NodeStatusToModel(st)
	if m.GetNode() == "" {
		m.Node = p.node
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("bgpstatus: encode the status: %w", err)
	}
	return b, nil
}

func (p *Publisher) write(ctx context.Context, value []byte) error {
	wctx, cancel := context.WithTimeout(ctx, p.cfg.WriteTimeout)
	defer cancel()
	if err := p.w.Put(wctx, p.key, value); err != nil {
		return fmt.Errorf("bgpstatus: write %s: %w", p.key, err)
	}
	p.mu.Lock()
	p.stats.Writes++
	p.stats.LastWrite = time.Now()
	p.mu.Unlock()
	p.log.Debug("status written", slog.String("key", p.key), slog.Int("bytes", len(value)))
	return nil
}
