package bgpreflector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/vswitchkit/vswitchkit/bgp/bgpmodel"
	"github.com/vswitchkit/vswitchkit/internal/cfgutil"
	"github.com/vswitchkit/vswitchkit/internal/lifecycle"
	"github.com/vswitchkit/vswitchkit/internal/retry"
)

// Defaults of [StatusWriterConfig].
const (
	DefaultStatusMinInterval        = 10 * time.Second
	DefaultStatusMaxWritesPerSecond = 5
)

// StatusWriterConfig configures a [StatusWriter]. The zero value is valid.
type StatusWriterConfig struct {
	// Disabled switches the writer off: Run then only waits for its
	// context. Cilium found per-node status writes loading the API server
	// of large clusters; the agents' etcd keys keep the status either way.
	Disabled bool
	// Prefix is the etcd prefix of the agents' statuses. Default:
	// bgpmodel.DefaultStatusPrefix.
	Prefix string
	// MinInterval bounds the writes per node: a node's object is written
	// at most once per MinInterval (its later changes coalesce). Default
	// (zero) [DefaultStatusMinInterval]; negative: no bound per node.
	MinInterval time.Duration
	// MaxWritesPerSecond bounds the writes of all nodes together. Default
	// (zero) [DefaultStatusMaxWritesPerSecond]; negative: no bound.
	MaxWritesPerSecond int
	// WriteTimeout bounds one request (etcd or API server). Default (zero)
	// 10s; negative is an error.
	WriteTimeout time.Duration
	// Logger receives the writer's logs: Warn when requests start failing
	// (once), Info when they succeed again and at start and stop, Debug per
	// write. Default: discard.
	Logger *slog.Logger
}

// StatusWriterStats are the writer's counters; a copy.
type StatusWriterStats struct {
	// Writes counts objects created, updated or deleted; Errors failed
	// requests; Pending is the number of nodes whose status waits to be
	// written.
	Writes, Errors uint64
	Pending        int
}

// StatusWriter copies the BGP status that every agent publishes in etcd
// (package bgp/bgpstatus) into a per-node object of kind BGPNodeStatus
// (crd-v2.yaml; named after the node, only its status is written), while
// the reflector it runs beside is the leader, at a bounded rate: at most
// once per node per MinInterval and MaxWritesPerSecond overall; a node's
// changes coalesce into its latest status. A status key that goes deletes
// the node's object. When the replica becomes leader it checks every
// object again. It can be switched off (Disabled).
//
// Unlike Cilium's CiliumBGPNodeConfig, whose spec Cilium's operator fills
// with each node's resolved instances, BGPNodeStatus has no spec: each
// agent resolves its own configuration and publishes what it applied in
// the status (source, instances, peers, conditions).
//
// StatusWriter is safe for concurrent use: Run is called once; Stats may
// be called at any time.
type StatusWriter struct {
	cli    *clientv3.Client
	ri     dynamic.NamespaceableResourceInterface
	leader func() bool
	cfg    StatusWriterConfig
	log    *slog.Logger
	run    lifecycle.Once

	mu    sync.Mutex // guards stats
	stats StatusWriterStats
}

// NewStatusWriter returns a writer that reads the statuses through cli
// and writes the objects through dyn while leader() is true (pass the
// reflector's Stats().Leader). It does no I/O and starts no goroutine.
func NewStatusWriter(cli *clientv3.Client, dyn dynamic.Interface, leader func() bool, cfg StatusWriterConfig) (*StatusWriter, error) {
	var errs []error
	if cli == nil {
		errs = append(errs, errors.New("bgpreflector: NewStatusWriter: etcd client is nil"))
	}
	if dyn == nil {
		errs = append(errs, errors.New("bgpreflector: NewStatusWriter: dynamic client is nil"))
	}
	if leader == nil {
		errs = append(errs, errors.New("bgpreflector: NewStatusWriter: leader is nil"))
	}
	if cfg.Prefix == "" {
		cfg.Prefix = bgpmodel.DefaultStatusPrefix
	}
	for _, err := range cfgutil.Durations([]cfgutil.Duration{
		{Name: "MinInterval", Value: &cfg.MinInterval, Default: DefaultStatusMinInterval, Off: true},
		{Name: "WriteTimeout", Value: &cfg.WriteTimeout, Default: 10 * time.Second},
	}) {
		errs = append(errs, fmt.Errorf("bgpreflector: StatusWriterConfig.%w", err))
	}
	for _, err := range cfgutil.Ints([]cfgutil.Int{
		{Name: "MaxWritesPerSecond", Value: &cfg.MaxWritesPerSecond, Default: DefaultStatusMaxWritesPerSecond, Off: true},
	}) {
		errs = append(errs, fmt.Errorf("bgpreflector: StatusWriterConfig.%w", err))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var ri dynamic.NamespaceableResourceInterface
	if dyn != nil {
		ri = dyn.Resource(GroupVersionResourceV2(PluralNodeStatus))
	}
	return &StatusWriter{cli: cli, ri: ri, leader: leader, cfg: cfg, log: log.With(slog.String("component", "bgp-status-writer"))}, nil
}

// Stats returns the counters.
func (w *StatusWriter) Stats() StatusWriterStats {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stats
}

// nodeState is what the writer knows of one node; owned by Run.
type nodeState struct {
	status    *bgpmodel.NodeStatus // nil: the key is gone
	dirty     bool
	lastWrite time.Time
}

// Run follows the statuses in etcd and writes the objects while the
// replica leads, until ctx ends; then it returns ctx.Err(). Failed
// requests are retried (etcd: after re-reading the prefix, with a jittered
// exponential backoff between failed reads); they are
// counted and logged at Warn when they start and at Info when they stop.
// A second call returns an error wrapping ErrAlreadyRunning.
func (w *StatusWriter) Run(ctx context.Context) error {
	if err := w.run.Start("bgpreflector status writer"); err != nil {
		return err
	}
	if w.cfg.Disabled {
		w.log.Info("BGP status writes are switched off")
		<-ctx.Done()
		return ctx.Err()
	}
	w.log.Info("started", slog.String("prefix", w.cfg.Prefix))
	defer w.log.Info("stopped")
	nodes := map[string]*nodeState{}
	var (
		watchCh   clientv3.WatchChan
		cancelW   context.CancelFunc = func() {}
		wasLeader bool
		lastAny   time.Time
		failing   error
	)
	defer func() { cancelW() }()
	fail := func(err error) {
		w.mu.Lock()
		w.stats.Errors++
		w.mu.Unlock()
		if failing == nil || failing.Error() != err.Error() {
			w.log.Warn("BGP status writes fail; retrying", slog.Any("error", err))
		}
		failing = err
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	// A failed read of the prefix (or a watch that ends at once) is tried
	// again after a jittered exponential backoff, not every tick.
	loadBackoff := retry.NewClientBackoff(100*time.Millisecond, 5*time.Second)
	var loadAt time.Time
	for {
		if watchCh == nil && !time.Now().Before(loadAt) {
			rev, err := w.load(ctx, nodes)
			if err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				fail(err)
				loadAt = time.Now().Add(loadBackoff.NextBackOff())
			} else {
				watchCh, cancelW = w.watch(ctx, rev+1)
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case wr, ok := <-watchCh:
			if !ok || wr.Err() != nil {
				cancelW()
				watchCh = nil // re-read the prefix and watch again
				loadAt = time.Now().Add(loadBackoff.NextBackOff())
				continue
			}
			loadBackoff.Reset()
			for _, ev := range wr.Events {
				w.apply(nodes, strings.TrimPrefix(string(ev.Kv.Key), w.cfg.Prefix), ev.Type == clientv3.EventTypeDelete, ev.Kv.Value)
			}
		case <-tick.C:
		}
		leader := w.leader()
		if leader && !wasLeader {
			for _, n := range nodes {
				n.dirty = true // check every object again
			}
		}
		wasLeader = leader
		pending := 0
		for _, name := range slices.Sorted(maps.Keys(nodes)) {
			n := nodes[name]
			if !n.dirty {
				continue
			}
			pending++
			if !leader || (w.cfg.MinInterval > 0 && time.Since(n.lastWrite) < w.cfg.MinInterval) {
				continue
			}
			if w.cfg.MaxWritesPerSecond > 0 && time.Since(lastAny) < time.Second/time.Duration(w.cfg.MaxWritesPerSecond) {
				continue
			}
			lastAny = time.Now()
			if err := w.write(ctx, name, n.status); err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				fail(err)
				continue
			}
			if failing != nil {
				failing = nil
				w.log.Info("BGP status writes succeed again")
			}
			n.dirty, n.lastWrite = false, time.Now()
			pending--
			if n.status == nil {
				delete(nodes, name)
			}
		}
		w.mu.Lock()
		w.stats.Pending = pending
		w.mu.Unlock()
	}
}

// watch watches the prefix from revision rev; cancel ends the watch.
func (w *StatusWriter) watch(ctx context.Context, rev int64) (clientv3.WatchChan, context.CancelFunc) {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	return w.cli.Watch(wctx, w.cfg.Prefix, clientv3.WithPrefix(), clientv3.WithRev(rev)), cancel
}

// load reads every status under the prefix and returns the revision.
func (w *StatusWriter) load(ctx context.Context, nodes map[string]*nodeState) (int64, error) {
	rctx, cancel := context.WithTimeout(ctx, w.cfg.WriteTimeout)
	defer cancel()
	resp, err := w.cli.Get(rctx, w.cfg.Prefix, clientv3.WithPrefix())
	if err != nil {
		return 0, fmt.Errorf("bgpreflector: read %s: %w", w.cfg.Prefix, err)
	}
	seen := map[string]bool{}
	for _, kv := range resp.Kvs {
		name := strings.TrimPrefix(string(kv.Key), w.cfg.Prefix)
		seen[name] = true
		w.apply(nodes, name, false, kv.Value)
	}
	for name := range nodes {
		if !seen[name] {
			w.apply(nodes, name, true, nil)
		}
	}
	return resp.Header.Revision, nil
}

// apply records a node's new status (nil when deleted) if it changed.
func (w *StatusWriter) apply(nodes map[string]*nodeState, name string, deleted bool, value []byte) {
	n := nodes[name]
	if n == nil {
		n = &nodeState{}
		nodes[name] = n
	}
	if deleted {
		n.status, n.dirty = nil, true
		return
	}
	var m bgpmodel.NodeStatus
	if err := proto.Unmarshal(value, &m); err != nil {
		w.log.Warn("ignoring an undecodable BGP status", slog.String("node", name), slog.Any("error", err))
		return
	}
	if n.status != nil && proto.Equal(n.status, &m) {
		return
	}
	n.status, n.dirty = &m, true
}

// write makes the node's object show its status (creating it), or deletes
// the object when the status is gone.
func (w *StatusWriter) write(ctx context.Context, name string, st *bgpmodel.NodeStatus) error {
	wctx, cancel := context.WithTimeout(ctx, w.cfg.WriteTimeout)
	defer cancel()
	count := func() {
		w.mu.Lock()
		w.stats.Writes++
		w.mu.Unlock()
	}
	if st == nil {
		err := w.ri.Delete(wctx, name, metav1.DeleteOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err == nil {
			count()
		}
		return err
	}
	want := StatusObject(st)
	obj, err := w.ri.Get(wctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		obj = &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": GroupV2 + "/" + VersionV2, "kind": KindNodeStatus, "metadata": map[string]any{"name": name},
		}}
		if obj, err = w.ri.Create(wctx, obj, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("bgpreflector: create %s %s: %w", KindNodeStatus, name, err)
		}
		count()
	} else if err != nil {
		return fmt.Errorf("bgpreflector: get %s %s: %w", KindNodeStatus, name, err)
	}
	if cur, _, _ := unstructured.NestedMap(obj.Object, "status"); reflect.DeepEqual(cur, want) {
		return nil
	}
	obj = obj.DeepCopy()
	obj.Object["status"] = want
	if _, err := w.ri.UpdateStatus(wctx, obj, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("bgpreflector: update the status of %s %s: %w", KindNodeStatus, name, err)
	}
	count()
	w.log.Debug("status written", slog.String("node", name))
	return nil
}

// StatusObject returns the status of a BGPNodeStatus object for a node's
// status, in the JSON shape of crd-v2.yaml (Cilium's
// CiliumBGPNodeConfig status, plus source and conditions): source,
// bgpInstances[].{name, localASN, routerID, localPort, peers[].{name,
// peerAddress, peerASN, peeringState, establishedTime,
// timers.{appliedHoldTimeSeconds, appliedKeepaliveSeconds},
// routeCount[].{afi, safi, advertised, received, accepted}, conditions}},
// conditions[].{type, object, message}. Empty fields are left out.
func StatusObject(m *bgpmodel.NodeStatus) map[string]any {
	out := map[string]any{}
	set := func(o map[string]any, k string, v any) {
		switch x := v.(type) {
		case string:
			if x == "" {
				return
			}
		case int64:
			if x == 0 {
				return
			}
		case []any:
			if len(x) == 0 {
				return
			}
		case map[string]any:
			if len(x) == 0 {
				return
			}
		}
		o[k] = v
	}
	conds := func(cs []*bgpmodel.Condition) []any {
		var l []any
		for _, c := range cs {
			o := map[string]any{}
			set(o, "type", c.GetType())
			set(o, "object", c.GetObject())
			set(o, "message", c.GetMessage())
			l = append(l, o)
		}
		return l
	}
	set(out, "source", m.GetSource())
	var instances []any
	for _, in := range m.GetBgpInstances() {
		o := map[string]any{}
		set(o, "name", in.GetName())
		set(o, "localASN", int64(in.GetLocalAsn()))
		set(o, "routerID", in.GetRouterId())
		set(o, "localPort", int64(in.GetLocalPort()))
		var peers []any
		for _, p := range in.GetPeers() {
			po := map[string]any{}
			set(po, "name", p.GetName())
			set(po, "peerAddress", p.GetPeerAddress())
			set(po, "peerASN", int64(p.GetPeerAsn()))
			set(po, "peeringState", p.GetPeeringState())
			set(po, "establishedTime", p.GetEstablishedTime())
			if t := p.GetTimers(); t != nil {
				to := map[string]any{}
				set(to, "appliedHoldTimeSeconds", int64(t.GetAppliedHoldTimeSeconds()))
				set(to, "appliedKeepaliveSeconds", int64(t.GetAppliedKeepaliveSeconds()))
				set(po, "timers", to)
			}
			var counts []any
			for _, rc := range p.GetRouteCount() {
				co := map[string]any{"afi": rc.GetAfi(), "safi": rc.GetSafi(),
					"advertised": int64(rc.GetAdvertised()), "received": int64(rc.GetReceived()), "accepted": int64(rc.GetAccepted())}
				counts = append(counts, co)
			}
			set(po, "routeCount", counts)
			set(po, "conditions", conds(p.GetConditions()))
			peers = append(peers, po)
		}
		set(o, "peers", peers)
		instances = append(instances, o)
	}
	set(out, "bgpInstances", instances)
	set(out, "conditions", conds(m.GetConditions()))
	return out
}
