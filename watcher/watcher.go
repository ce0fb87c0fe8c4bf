package watcher

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/internal/lifecycle"
	"github.com/vswitchkit/vswitchkit/internal/retry"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	grpcbackoff "google.golang.org/grpc/backoff"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/protobuf/proto"
)

// Watcher turns the Kubernetes-state and external-configuration key spaces
// of etcd into DBResync, KubeStateChange and ExternalConfigChange events,
// and keeps a local mirror of what it delivered.
//
// Watcher is safe for concurrent use: Run may be called once; Stats may be
// called at any time from any goroutine.
type Watcher struct {
	cfg    Config
	reg    *registry
	loop   controller.EventLoop
	client *clientv3.Client // user-supplied; nil when Run creates its own
	log    *slog.Logger

	run   lifecycle.Once
	stats counters

	// Test hooks, set before Run.
	hookAfterSnapshot func(rev int64)   // after a remote snapshot was read, before it is pushed
	hookMirror        func(m *mirror)   // after the mirror was opened
	hookPage          func(n int) error // before the n-th page request (from 1) of a snapshot; an error fails it
}

// New returns a watcher that creates its own etcd client from cfg.Etcd when
// Run starts, and closes it when Run returns. It does no I/O.
func New(loop controller.EventLoop, cfg Config) (*Watcher, error) {
	return newWatcher(nil, loop, cfg)
}

// NewWithClient returns a watcher that uses client, which stays owned by the
// caller: Run does not close it, and cfg.Etcd is ignored (the client's own
// TLS, authentication and keepalive settings apply). It does no I/O.
func NewWithClient(client *clientv3.Client, loop controller.EventLoop, cfg Config) (*Watcher, error) {
	if client == nil {
		return nil, errors.New("watcher: nil etcd client")
	}
	return newWatcher(client, loop, cfg)
}

func newWatcher(client *clientv3.Client, loop controller.EventLoop, cfg Config) (*Watcher, error) {
	if loop == nil {
		return nil, errors.New("watcher: nil event loop")
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	reg, err := newRegistry(cfg)
	if err != nil {
		return nil, fmt.Errorf("watcher config: %w", err)
	}
	w := &Watcher{
		cfg:    cfg,
		reg:    reg,
		loop:   loop,
		client: client,
		log:    cfg.Logger.With(slog.String("component", "watcher")),
	}
	w.stats.skipped = make(map[string]*skipCounters, len(reg.names))
	for _, name := range reg.names {
		w.stats.skipped[name] = new(skipCounters)
	}
	return w, nil
}

// Stats is a snapshot of the watcher's counters. All counts are since New.
// A Stats value is a copy: it is safe for concurrent use.
type Stats struct {
	// RemoteResyncs and LocalResyncs count delivered DBResync events read
	// from etcd and from the mirror.
	RemoteResyncs, LocalResyncs uint64
	// KubeChanges and ExternalChanges count delivered KubeStateChange and
	// ExternalConfigChange events.
	KubeChanges, ExternalChanges uint64
	// BadKeys and BadValues count skipped keys that break their resource's
	// key scheme, and values that did not decode.
	BadKeys, BadValues uint64
	// UnknownKeys counts skipped keys in the watched range that belong to
	// no registered resource (resources this agent does not use).
	UnknownKeys uint64
	// ConnectErrors counts failed attempts to create the client or to read a
	// snapshot, and failed requests for a page of a snapshot (repeated
	// alone).
	ConnectErrors uint64
	// Compactions, Reconnects and WatchErrors count resyncs after a watch
	// that fell behind the compacted revision, after the connection to etcd
	// came back, and after any other loss of the watch.
	Compactions, Reconnects, WatchErrors uint64
	// PushRetries counts PushEvent calls that failed (normally with
	// controller.ErrQueueFull) and were retried; ForcedResyncs counts
	// changes given up after Config.QueueFullTimeout and replaced by a
	// fresh DBResync.
	PushRetries, ForcedResyncs uint64
	// MirrorWrites and MirrorErrors count mirror transactions that
	// committed and that failed.
	MirrorWrites, MirrorErrors uint64
	// Unkept counts values left out by Config.Keep (in snapshots and
	// changes).
	Unkept uint64
	// Revision is the highest etcd revision delivered (of a remote snapshot
	// or of a change); 0 before the first remote snapshot.
	Revision int64
	// Layout is the key layout of the latest snapshot read from etcd
	// (kubemodel.LayoutFlat or kubemodel.LayoutNodePods); 0 before the
	// first. LayoutChanges counts the resyncs after etcd's layout key
	// changed (the reflector moved the state to another layout).
	Layout        int
	LayoutChanges uint64
	// SkippedByResource splits BadKeys and BadValues by Kubernetes
	// resource: it has an entry for every registered resource (by name,
	// zero when nothing was skipped), so a metric per resource can be
	// exported from it. A key of no registered resource counts in
	// UnknownKeys only.
	SkippedByResource map[string]Skipped
	// SkippedExternal is the part of BadKeys and BadValues that was
	// external configuration.
	SkippedExternal Skipped
}

// Skipped counts the keys of one resource (or of the external
// configuration) that were skipped: keys that break the resource's key
// scheme, and values that did not decode.
type Skipped struct {
	BadKeys, BadValues uint64
}

type counters struct {
	remoteResyncs, localResyncs  atomic.Uint64
	kubeChanges, externalChanges atomic.Uint64
	badKeys, badValues           atomic.Uint64
	unknownKeys                  atomic.Uint64
	connectErrors                atomic.Uint64
	compactions, reconnects      atomic.Uint64
	watchErrors                  atomic.Uint64
	pushRetries, forcedResyncs   atomic.Uint64
	mirrorWrites, mirrorErrors   atomic.Uint64
	unkept                       atomic.Uint64
	revision                     atomic.Int64
	layout                       atomic.Int64
	layoutChanges                atomic.Uint64
	// skipped splits badKeys and badValues by resource name; the map is
	// fixed at New (one entry per registered resource).
	skipped         map[string]*skipCounters
	skippedExternal skipCounters
}

type skipCounters struct{ badKeys, badValues atomic.Uint64 }

func (c *skipCounters) load() Skipped {
	return Skipped{BadKeys: c.badKeys.Load(), BadValues: c.badValues.Load()}
}

// Stats returns the current counters.
func (w *Watcher) Stats() Stats {
	c := &w.stats
	skipped := make(map[string]Skipped, len(c.skipped))
	for name, sc := range c.skipped {
		skipped[name] = sc.load()
	}
	return Stats{
		RemoteResyncs: c.remoteResyncs.Load(), LocalResyncs: c.localResyncs.Load(),
		KubeChanges: c.kubeChanges.Load(), ExternalChanges: c.externalChanges.Load(),
		BadKeys: c.badKeys.Load(), BadValues: c.badValues.Load(), UnknownKeys: c.unknownKeys.Load(),
		ConnectErrors: c.connectErrors.Load(),
		Compactions:   c.compactions.Load(), Reconnects: c.reconnects.Load(), WatchErrors: c.watchErrors.Load(),
		PushRetries: c.pushRetries.Load(), ForcedResyncs: c.forcedResyncs.Load(),
		MirrorWrites: c.mirrorWrites.Load(), MirrorErrors: c.mirrorErrors.Load(),
		Unkept:   c.unkept.Load(),
		Revision: c.revision.Load(),
		Layout:   int(c.layout.Load()), LayoutChanges: c.layoutChanges.Load(),
		SkippedByResource: skipped, SkippedExternal: c.skippedExternal.load(),
	}
}

// Reasons a watch session ends and the watcher resyncs.
var (
	errReconnected   = errors.New("connection to etcd re-established")
	errForced        = errors.New("event loop refused a change for too long")
	errLayoutChanged = errors.New("the key layout changed")
)

// run holds what one Run call owns. It is used by the Run goroutine only.
type run struct {
	w      *Watcher
	client *clientv3.Client
	mirror *mirror       // nil without a mirror
	writer *mirrorWriter // writes mirror; nil without a mirror
	push   pusher
	st     *state // delivered state; nil before the first DBResync

	mirrorDirty bool // the mirror does not match st: rewrite it at the next write
	pending     []mirrorOp
	pendingRev  int64
}

// Run delivers the start-up DBResync and then the changes, until ctx is
// done or the event loop stops. It returns ctx.Err() after cancellation, an
// error wrapping controller.ErrStopped when the loop stopped, an error
// wrapping [ErrMirror] when the mirror file cannot be opened, an error
// wrapping [ErrClientConfig] when the TLS files cannot be loaded,
// [ErrClientClosed] when the caller's client was closed, or an error
// wrapping [ErrAlreadyRunning] when called before. It never returns nil. Connection failures, lost watches and bad values are
// handled (and counted in [Watcher.Stats]), not returned. Run returns only after every goroutine it
// started has exited; a client created by Run is closed.
func (w *Watcher) Run(ctx context.Context) error {
	if err := w.run.Start("watcher"); err != nil {
		return err
	}
	r := &run{w: w, client: w.client}
	r.push = pusher{
		loop: w.loop, min: defaultPushMinBackoff, max: defaultPushMaxBackoff, stats: &w.stats,
		onRefused: func(ev controller.Event, err error) {
			w.log.Warn("event loop refuses events; retrying", slog.String("event", ev.GetName()), slog.Any("error", err))
		},
		onAccepted: func() { w.log.Info("event loop accepts events again") },
	}
	if w.cfg.MirrorPath != "" {
		m, err := openMirror(w.cfg.MirrorPath)
		if err != nil {
			return err
		}
		defer func() {
			if err := m.close(); err != nil {
				w.log.Warn("cannot close the local mirror", slog.Any("error", err))
			}
		}()
		r.mirror = m
		if w.hookMirror != nil {
			w.hookMirror(m)
		}
		r.writer = newMirrorWriter(m, &w.stats, w.log, w.cfg.MirrorWriteDelay, retry.NewBackoff(w.cfg.RetryMinBackoff, w.cfg.RetryMaxBackoff))
		go r.writer.run()
		defer r.writer.close() // before m.close
	}
	if w.client == nil {
		defer func() {
			if r.client != nil {
				r.client.Close()
			}
		}()
	}
	w.log.Info("watcher started",
		slog.String("kube_state_prefix", w.cfg.KubeStatePrefix),
		slog.String("kube_state_watched", w.reg.kubeWatch),
		slog.String("external_config_prefix", w.cfg.ExternalConfigPrefix),
		slog.String("mirror", w.cfg.MirrorPath))
	err := r.loop(ctx)
	w.log.Info("watcher stopped")
	return err
}

func (r *run) loop(ctx context.Context) error {
	w := r.w
	cfg := &w.cfg
	fallbackAt := time.Now().Add(cfg.MirrorFallbackDelay)
	fallbackPending := r.mirror != nil
	// Every agent's watcher is a client of the same etcd: after an etcd
	// restart or a storm of timeouts they all fail at once, and the wide
	// jitter of the client backoff keeps them from retrying in waves.
	connectBackoff := retry.NewClientBackoff(cfg.RetryMinBackoff, cfg.RetryMaxBackoff)
	watchBackoff := retry.NewClientBackoff(cfg.RetryMinBackoff, cfg.RetryMaxBackoff)
	failing := false
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		st, err := r.snapshot(ctx, fallbackPending, fallbackAt)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if errors.Is(err, ErrClientConfig) || errors.Is(err, ErrLayout) {
				return err
			}
			if w.client != nil && w.client.Ctx().Err() != nil {
				return ErrClientClosed
			}
			w.stats.connectErrors.Add(1)
			if !failing {
				w.log.Warn("cannot read a snapshot from etcd; retrying", slog.Any("error", err))
				failing = true
			} else {
				w.log.Debug("cannot read a snapshot from etcd", slog.Any("error", err))
			}
			if fallbackPending && !time.Now().Before(fallbackAt) {
				fallbackPending = false
				if err := r.startLocal(ctx); err != nil {
					return err
				}
			}
			wait := connectBackoff.NextBackOff()
			if fallbackPending {
				wait = min(wait, time.Until(fallbackAt))
			}
			if err := retry.Sleep(ctx, wait); err != nil {
				return err
			}
			continue
		}
		connectBackoff.Reset()
		if failing {
			w.log.Info("etcd reachable again")
			failing = false
		}
		fallbackPending = false
		if w.hookAfterSnapshot != nil {
			w.hookAfterSnapshot(st.rev)
		}
		if err := r.push.push(ctx, st.dbResync(w.reg.names, false), 0); err != nil {
			return err
		}
		r.st = st
		w.stats.remoteResyncs.Add(1)
		w.stats.revision.Store(st.rev)
		w.stats.layout.Store(int64(st.layout))
		w.log.Info("delivered DBResync from etcd", slog.Int64("revision", st.rev), slog.Int("layout", st.layout),
			slog.Int("kube_keys", len(st.kube)), slog.Int("external_keys", len(st.ext)))
		r.mirrorDirty = true
		r.writeMirror()

		progressed, err := r.session(ctx)
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, controller.ErrStopped):
			return err
		case errors.Is(err, errCompacted):
			w.stats.compactions.Add(1)
			w.log.Info("watch fell behind the compacted revision; resyncing", slog.Any("error", err))
		case errors.Is(err, ErrLayout):
			return err
		case errors.Is(err, errLayoutChanged):
			w.stats.layoutChanges.Add(1)
			w.log.Info("the key layout of the Kubernetes state changed; resyncing", slog.Int("layout", st.layout))
		case errors.Is(err, errReconnected):
			w.stats.reconnects.Add(1)
			w.log.Info("reconnected to etcd; resyncing")
		case errors.Is(err, errForced):
			w.stats.forcedResyncs.Add(1)
			w.log.Warn("event loop refused a change for too long; delivering a fresh DBResync instead")
		default:
			w.stats.watchErrors.Add(1)
			w.log.Warn("watch lost; resyncing", slog.Any("error", err))
			if progressed {
				watchBackoff.Reset()
			}
			if err := retry.Sleep(ctx, watchBackoff.NextBackOff()); err != nil {
				return err
			}
		}
	}
}

// ensureClient creates the client when Run owns it.
func (r *run) ensureClient() error {
	if r.client != nil {
		return nil
	}
	ec := r.w.cfg.Etcd
	tlsCfg, err := ec.tlsConfig()
	if err != nil {
		return fmt.Errorf("%w: %w", ErrClientConfig, err)
	}
	c, err := clientv3.New(clientv3.Config{
		Endpoints:            ec.Endpoints,
		DialTimeout:          ec.DialTimeout,
		DialKeepAliveTime:    ec.KeepAliveTime,
		DialKeepAliveTimeout: ec.KeepAliveTimeout,
		TLS:                  tlsCfg,
		Username:             ec.Username,
		Password:             ec.Password,
		Logger:               zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff: grpcbackoff.Config{
				BaseDelay:  r.w.cfg.RetryMinBackoff,
				Multiplier: 1.6,
				Jitter:     0.2,
				MaxDelay:   r.w.cfg.RetryMaxBackoff,
			},
			MinConnectTimeout: ec.DialTimeout,
		})},
	})
	if err != nil {
		// clientv3 errors name endpoints and causes, never the password.
		return fmt.Errorf("create etcd client: %w", err)
	}
	r.client = c
	return nil
}

// snapshot reads the Kubernetes state and the external configuration at one
// revision: first the layout key (its revision is the snapshot's), then
// the ranges of that layout, in pages of Config.SnapshotPageSize keys.
// Every request is bounded by Config.RequestTimeout and a failed page is
// repeated alone, after a jittered backoff, at the snapshot's revision,
// so that a large snapshot read by many agents at once is read once per
// agent however many requests time out (a snapshot read whole and
// retried whole costs etcd the whole read again per failure). While the
// mirror fallback is pending, the attempt ends at fallbackAt at the
// latest, a deadline that every page etcd answers moves to
// MirrorFallbackDelay from then: a large snapshot that etcd serves slowly
// (150k peer records on a loaded machine took more than the 5 s default)
// is read to the end instead of being dropped for a stale mirror, and an
// etcd that stops answering mid-snapshot still gets the fallback. An error means no snapshot: the layout is refused (wrapping
// ErrLayout), the revision was compacted meanwhile (the caller starts
// over), ctx ended, the client is closed, or the fallback is due.
func (r *run) snapshot(ctx context.Context, fallbackPending bool, fallbackAt time.Time) (*state, error) {
	if err := r.ensureClient(); err != nil {
		return nil, err
	}
	w := r.w
	if w.hookPage != nil {
		if err := w.hookPage(0); err != nil {
			return nil, err
		}
	}
	lresp, err := r.page(ctx, w.reg.layoutKey, "", 0, fallbackPending, fallbackAt)
	if err != nil {
		return nil, err
	}
	progress := func() {
		if fallbackPending {
			fallbackAt = time.Now().Add(w.cfg.MirrorFallbackDelay)
		}
	}
	progress()
	var value []byte
	if len(lresp.Kvs) > 0 {
		value = lresp.Kvs[0].Value
	}
	layout, err := knownLayout(value)
	if err != nil {
		return nil, err
	}
	st := newState(lresp.Header.Revision)
	st.layout = layout
	bo := retry.NewClientBackoff(w.cfg.RetryMinBackoff, w.cfg.RetryMaxBackoff)
	deg := retry.NewDegraded(w.log, "reading the snapshot from etcd")
	pages := 0
	for _, rg := range w.reg.snapshotRanges(layout) {
		from := rg.start
		for {
			pages++
			var resp *clientv3.GetResponse
			var err error
			if w.hookPage != nil {
				err = w.hookPage(pages)
			}
			if err == nil {
				resp, err = r.page(ctx, from, rg.end, st.rev, fallbackPending, fallbackAt)
			}
			if err != nil {
				switch {
				case ctx.Err() != nil, errors.Is(err, rpctypes.ErrCompacted),
					w.client != nil && w.client.Ctx().Err() != nil,
					fallbackPending && !time.Now().Before(fallbackAt):
					return nil, err
				}
				w.stats.connectErrors.Add(1)
				d := bo.NextBackOff()
				if fallbackPending {
					d = min(d, time.Until(fallbackAt))
				}
				deg.Fail(err, d)
				if err := retry.Sleep(ctx, d); err != nil {
					return nil, err
				}
				continue
			}
			deg.OK()
			bo.Reset()
			progress()
			for _, kv := range resp.Kvs {
				r.add(st, kv)
			}
			if !resp.More || len(resp.Kvs) == 0 {
				break
			}
			from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
		}
	}
	return st, nil
}

// knownLayout returns the layout the value of the layout key names (nil:
// the key does not exist), or a *LayoutError when the watcher does not
// read it.
func knownLayout(value []byte) (int, error) {
	layout, err := kubemodel.ParseLayout(value)
	if err != nil || (layout != kubemodel.LayoutFlat && layout != kubemodel.LayoutNodePods) {
		return 0, &LayoutError{Key: kubemodel.LayoutKey, Value: string(value)}
	}
	return layout, nil
}

// page reads one page of the range [from, end) (the key from when end is
// empty) at revision rev (the current one when 0), bounded by
// Config.RequestTimeout and, while the fallback is pending, by fallbackAt.
func (r *run) page(ctx context.Context, from, end string, rev int64, fallbackPending bool, fallbackAt time.Time) (*clientv3.GetResponse, error) {
	w := r.w
	deadline := time.Now().Add(w.cfg.RequestTimeout)
	if fallbackPending && fallbackAt.Before(deadline) {
		deadline = fallbackAt
	}
	pctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	var opts []clientv3.OpOption
	if end != "" {
		opts = append(opts, clientv3.WithRange(end), clientv3.WithLimit(int64(w.cfg.SnapshotPageSize)))
	}
	if rev != 0 {
		opts = append(opts, clientv3.WithRev(rev))
	}
	resp, err := r.client.Get(pctx, from, opts...)
	if err != nil {
		return nil, fmt.Errorf("read snapshot: %w", err)
	}
	return resp, nil
}

// add adds one key of a snapshot to st (unless it is foreign, bad, not
// kept or a leftover of the flat layout).
func (r *run) add(st *state, kv *mvccpb.KeyValue) {
	w := r.w
	key := string(kv.Key)
	kind, rel := w.reg.classify(key, st.layout)
	switch kind {
	case foreignKey, layoutKey:
		return
	case flatKey:
		// A leftover of the flat layout: the reflector deletes these
		// after it moved the state (a write of one ends Run, see
		// applyKube).
		w.stats.unknownKeys.Add(1)
		return
	}
	res, msg, kept, err := w.decode(kind, rel, kv.Value, st.layout)
	if err != nil {
		w.reportBad(kind, rel, err)
		return
	}
	if !kept {
		return
	}
	st.part(kind)[rel] = &entry{res: res, raw: kv.Value, msg: msg, rev: kv.ModRevision}
}

// startLocal delivers the mirrored state as a DBResync with Local=true.
func (r *run) startLocal(ctx context.Context) error {
	w := r.w
	snap, ok, err := r.mirror.load()
	switch {
	case err != nil:
		r.w.stats.mirrorErrors.Add(1)
		w.log.Warn("cannot start from the local mirror; waiting for etcd", slog.Any("error", err))
		return nil
	case !ok:
		w.log.Info("local mirror is empty; waiting for etcd")
		return nil
	case snap.kubePrefix != w.cfg.KubeStatePrefix || snap.extPrefix != w.cfg.ExternalConfigPrefix:
		w.log.Warn("local mirror was written for other prefixes; waiting for etcd",
			slog.String("mirror_kube_state_prefix", snap.kubePrefix),
			slog.String("mirror_external_config_prefix", snap.extPrefix))
		return nil
	}
	st := newState(snap.rev)
	for kind, part := range map[keyKind]map[string][]byte{kubeKey: snap.kube, extKey: snap.ext} {
		for rel, raw := range part {
			res, msg, kept, err := w.decode(kind, rel, raw, 0)
			if err != nil {
				w.reportBad(kind, rel, err)
				continue
			}
			if !kept {
				continue
			}
			st.part(kind)[rel] = &entry{res: res, raw: raw, msg: msg}
		}
	}
	if err := r.push.push(ctx, st.dbResync(w.reg.names, true), 0); err != nil {
		return err
	}
	r.st = st
	w.stats.localResyncs.Add(1)
	w.log.Warn("etcd unreachable; delivered DBResync from the local mirror",
		slog.Int64("mirror_revision", snap.rev), slog.Int("kube_keys", len(st.kube)), slog.Int("external_keys", len(st.ext)))
	return nil
}

// decode decodes the value of rel, a key relative to the prefix of kind,
// unless it is left out: then kept is false and nothing is decoded (the
// value is counted in Stats.Unkept). Config.Keep leaves values out, and so
// does Config.NodeName the other nodes' pods of the flat layout (layout
// is the layout the value was read in; 0 for the mirror's values, which
// were kept when mirrored).
func (w *Watcher) decode(kind keyKind, rel string, raw []byte, layout int) (res *kubemodel.Resource, msg proto.Message, kept bool, err error) {
	filterPods := layout == kubemodel.LayoutFlat && w.cfg.NodeName != ""
	if kind != kubeKey || (w.cfg.Keep == nil && !filterPods) {
		res, msg, err = w.reg.decodeRel(kind, rel, raw)
		return res, msg, true, err
	}
	if res, err = w.reg.resourceOf(rel); err != nil {
		return nil, nil, false, err
	}
	if filterPods && res.Name == kubemodel.PodResource {
		if name, ok := podNodeName(raw); ok && string(name) != w.cfg.NodeName {
			w.stats.unkept.Add(1)
			return res, nil, false, nil
		}
	}
	if w.cfg.Keep != nil && !w.cfg.Keep(res.Name, rel, raw) {
		w.stats.unkept.Add(1)
		return res, nil, false, nil
	}
	msg, err = w.reg.decodeKube(res, rel, raw)
	return res, msg, true, err
}

// reportBad counts and logs a key that decode rejected; kind and rel are
// the key's part of the key space and its relative key.
func (w *Watcher) reportBad(kind keyKind, rel string, err error) {
	if errors.Is(err, errNoResource) {
		w.stats.unknownKeys.Add(1)
		w.log.Debug("skipping key of an unregistered resource", slog.Any("error", err))
		return
	}
	sc := &w.stats.skippedExternal
	if kind == kubeKey {
		// The error came from the resource whose key prefix matches (a
		// key that matches none is errNoResource).
		sc = w.stats.skipped[w.reg.resourceNameOf(rel)]
	}
	if errors.Is(err, ErrBadKey) {
		w.stats.badKeys.Add(1)
		sc.badKeys.Add(1)
	} else {
		w.stats.badValues.Add(1)
		sc.badValues.Add(1)
	}
	// The error names the key and the decoding problem, never the value.
	w.log.Warn("skipping key", slog.Any("error", err))
}

// session watches from the revision after the delivered snapshot and
// delivers the changes until the watch is lost. progressed tells whether any
// watch response arrived.
func (r *run) session(ctx context.Context) (progressed bool, err error) {
	w := r.w
	sctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	reconnected := make(chan struct{}, 1)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
		r.flushMirror()
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		watchConn(sctx, r.client.ActiveConnection(), reconnected)
	}()

	start := clientv3.WithRev(r.st.rev + 1)
	// One watch per range of the layout (the cluster-wide state and this
	// node's part of the per-node state), merged into kubeCh: the events
	// of one range (of one key) arrive in revision order.
	kubeCh := make(chan watchItem)
	for _, rg := range w.reg.kubeRanges(r.st.layout) {
		ch := r.client.Watch(sctx, rg.start, clientv3.WithRange(rg.end), start)
		wg.Go(func() {
			for {
				resp, ok := <-ch
				select {
				case kubeCh <- watchItem{resp, ok}:
				case <-sctx.Done():
					return
				}
				if !ok {
					return
				}
			}
		})
	}
	var extCh clientv3.WatchChan // nil: never ready
	if w.cfg.ExternalConfigPrefix != "" {
		extCh = r.client.Watch(sctx, w.cfg.ExternalConfigPrefix, clientv3.WithPrefix(), start)
	}
	for {
		var item watchItem
		var kind keyKind
		select {
		case item = <-kubeCh:
			kind = kubeKey
		case item.resp, item.ok = <-extCh:
			kind = extKey
		default:
			// Nothing ready: a good moment to write the batched changes.
			r.flushMirror()
			select {
			case item = <-kubeCh:
				kind = kubeKey
			case item.resp, item.ok = <-extCh:
				kind = extKey
			case <-reconnected:
				return progressed, errReconnected
			case <-ctx.Done():
				return progressed, ctx.Err()
			}
		}
		resp, ok := item.resp, item.ok
		if !ok {
			return progressed, errors.New("watch channel closed")
		}
		if err := resp.Err(); err != nil {
			if resp.CompactRevision != 0 {
				return progressed, fmt.Errorf("%w: %w", errCompacted, err)
			}
			return progressed, fmt.Errorf("watch: %w", err)
		}
		progressed = true
		apply := r.applyKube
		if kind == extKey {
			apply = r.applyExternal
		}
		if err := apply(ctx, resp.Events); err != nil {
			return progressed, err
		}
	}
}

// watchItem is a response of one of the Kubernetes-state watches; ok is
// false when its channel closed.
type watchItem struct {
	resp clientv3.WatchResponse
	ok   bool
}

// errCompacted marks a watch that started below the compacted revision.
var errCompacted = errors.New("watch revision compacted")

// watchConn signals on reconnected when conn becomes ready again after it
// was not ready, and returns.
func watchConn(ctx context.Context, conn *grpc.ClientConn, reconnected chan<- struct{}) {
	s := conn.GetState()
	down := s != connectivity.Ready
	for conn.WaitForStateChange(ctx, s) {
		s = conn.GetState()
		switch s {
		case connectivity.Ready:
			if down {
				reconnected <- struct{}{}
				return
			}
		case connectivity.Shutdown:
			return
		default:
			down = true
		}
	}
}

// change is one key's change of a watch response: the delivered entry
// before and the entry after (either nil), the mirror's write of it.
type change struct {
	rel       string
	rev       int64
	prev, cur *entry
	op        mirrorOp
}

// diff turns a watch event of the given stream into a change of the
// delivered state; ok is false when there is nothing to deliver (another
// stream's key, a revision already delivered or older than the snapshot,
// the same value written again, an unusable value of an undelivered key).
func (r *run) diff(stream keyKind, ev *clientv3.Event) (c change, ok bool) {
	kv := ev.Kv
	rev := kv.ModRevision
	kind, rel := r.w.reg.classify(string(kv.Key), r.st.layout)
	if kind != stream || rev <= r.st.rev {
		// Another stream's key (nested prefixes), or older than the
		// snapshot (cannot happen with a watch started after it).
		return change{}, false
	}
	prev := r.st.part(kind)[rel]
	if prev != nil && rev <= prev.rev {
		return change{}, false // already delivered
	}
	var cur *entry
	if ev.Type == clientv3.EventTypePut {
		res, msg, kept, err := r.w.decode(kind, rel, kv.Value, r.st.layout)
		switch {
		case err != nil:
			// The key no longer holds a usable value: it is skipped,
			// which for a delivered key means it is deleted.
			r.w.reportBad(kind, rel, err)
		case kept:
			cur = &entry{res: res, raw: kv.Value, msg: msg, rev: rev}
		}
	}
	switch {
	case prev == nil && cur == nil:
		return change{}, false
	case prev != nil && cur != nil && bytes.Equal(prev.raw, cur.raw):
		prev.rev = rev // same value written again: nothing changed
		return change{}, false
	}
	c = change{rel: rel, rev: rev, prev: prev, cur: cur, op: mirrorOp{ext: kind == extKey, key: rel}}
	if cur != nil {
		c.op.value = cur.raw
	}
	return c, true
}

// set records a delivered change in part.
func (c change) set(part map[string]*entry) {
	if c.cur != nil {
		part[c.rel] = c.cur
	} else {
		delete(part, c.rel)
	}
}

// applyKube delivers the Kubernetes changes of one watch response, one
// KubeStateChange per key.
func (r *run) applyKube(ctx context.Context, events []*clientv3.Event) error {
	for _, ev := range events {
		if ev.Kv.ModRevision <= r.st.rev {
			continue // older than the snapshot (cannot happen with a watch started after it)
		}
		switch kind, rel := r.w.reg.classify(string(ev.Kv.Key), r.st.layout); kind {
		case layoutKey:
			var value []byte
			if ev.Type == clientv3.EventTypePut {
				value = ev.Kv.Value
			}
			if layout, err := knownLayout(value); err != nil || layout != r.st.layout {
				// Resync: the snapshot reads the new layout, or refuses
				// it.
				return errLayoutChanged
			}
			continue
		case flatKey:
			if ev.Type == clientv3.EventTypePut {
				return &LayoutError{Key: rel, Layout: r.st.layout}
			}
			continue // the reflector deletes the flat layout's leftovers
		}
		c, ok := r.diff(kubeKey, ev)
		if !ok {
			continue
		}
		ch := &controller.KubeStateChange{Key: c.rel}
		if c.prev != nil {
			ch.Resource, ch.PrevValue = c.prev.res.Name, c.prev.msg
		}
		if c.cur != nil {
			ch.Resource, ch.NewValue = c.cur.res.Name, c.cur.msg
		}
		if err := r.deliver(ctx, ch); err != nil {
			return err
		}
		c.set(r.st.part(kubeKey))
		r.record(c.rev, c.op)
		r.w.stats.kubeChanges.Add(1)
	}
	return nil
}

// applyExternal delivers the external-configuration changes of one watch
// response: one ExternalConfigChange per revision (a transaction's keys
// arrive together).
func (r *run) applyExternal(ctx context.Context, events []*clientv3.Event) error {
	var group []change
	flush := func() error {
		if len(group) == 0 {
			return nil
		}
		ext := controller.NewExternalConfigChange(r.w.cfg.ExternalConfigSource, false)
		ops := make([]mirrorOp, 0, len(group))
		for _, c := range group {
			ext.UpdatedKVs[c.rel] = nil
			if c.cur != nil {
				ext.UpdatedKVs[c.rel] = c.cur.msg
			}
			ops = append(ops, c.op)
		}
		if err := r.deliver(ctx, ext); err != nil {
			return err
		}
		for _, c := range group {
			c.set(r.st.ext)
		}
		r.record(group[0].rev, ops...)
		r.w.stats.externalChanges.Add(1)
		group = group[:0]
		return nil
	}
	for _, ev := range events {
		if len(group) > 0 && ev.Kv.ModRevision != group[0].rev {
			// Deliver the previous revision first: the state must include
			// it before this event is compared to it.
			if err := flush(); err != nil {
				return err
			}
		}
		if c, ok := r.diff(extKey, ev); ok {
			group = append(group, c)
		}
	}
	return flush()
}

// deliver pushes one change, giving up after Config.QueueFullTimeout.
func (r *run) deliver(ctx context.Context, ev controller.Event) error {
	err := r.push.push(ctx, ev, r.w.cfg.QueueFullTimeout)
	switch {
	case err == nil:
		r.w.log.Debug("delivered", slog.String("event", ev.String()))
		return nil
	case errors.Is(err, errGaveUp):
		return errForced
	}
	return err
}

// record notes delivered changes in the stats and queues them for the
// mirror.
func (r *run) record(rev int64, ops ...mirrorOp) {
	if rev > r.w.stats.revision.Load() {
		r.w.stats.revision.Store(rev) // only the Run goroutine stores
	}
	if r.mirror == nil {
		return
	}
	r.pending = append(r.pending, ops...)
	r.pendingRev = max(r.pendingRev, rev)
	if len(r.pending) >= maxPendingMirrorOps {
		r.flushMirror()
	}
}

// maxPendingMirrorOps bounds the changes batched into one mirror
// transaction.
const maxPendingMirrorOps = 4096

// flushMirror writes the queued changes, or the whole state when the mirror
// is out of step with it.
func (r *run) flushMirror() {
	if r.mirror == nil || (len(r.pending) == 0 && !r.mirrorDirty) {
		return
	}
	r.writeMirror()
}

// writeMirror hands the queued changes, or the whole state when the
// mirror is out of step with it, to the mirror writer.
func (r *run) writeMirror() {
	if r.writer == nil || r.st == nil {
		return
	}
	var snap *mirrorSnapshot
	if r.mirrorDirty {
		snap = r.st.mirrorSnapshot(r.w.cfg.KubeStatePrefix, r.w.cfg.ExternalConfigPrefix)
	}
	r.writer.submit(r.pending, r.pendingRev, snap)
	r.pending = nil // the writer owns it now
	r.mirrorDirty = false
}
