package nodesync

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/internal/lifecycle"
	"github.com/vswitchkit/vswitchkit/internal/retry"
	"google.golang.org/protobuf/proto"
)

// API defines the methods provided by NodeSync for use by other components.
// Implementations must be safe for concurrent use.
type API interface {
	// GetNodeID returns the integer ID allocated for this node, 0 while it
	// is not known yet (for NodeSync: until Ready is closed). The method
	// is safe for concurrent use.
	GetNodeID() uint32

	// PublishNodeIPs publishes the currently assigned VPP-side node IPs of
	// the given IP version. It writes only when the set has really changed,
	// so it can be called on every resync. It returns ErrNotReady before the
	// start-up resync.
	PublishNodeIPs(addresses IPsWithNetworks, version IPVersion) error

	// GetAllNodes returns a copy of the information about all nodes in the
	// cluster (node name -> node info).
	GetAllNodes() Nodes
}

// NodeSync implements synchronization between Kubernetes nodes running the
// VPP vswitch using a cluster-wide database (by default etcd). It allocates
// the first free positive integer, starting with 1, as a cluster-wide node
// identifier, primarily used for IP allocations for endpoints inside this
// node that will not collide with other nodes. Furthermore, NodeSync
// publishes allocations and changes of the VPP-side node IP addresses -
// information that is not known to Kubernetes - and tells the event loop
// about other nodes with [NodeUpdate] events.
//
// NodeSync is safe for concurrent use. Its [controller.EventHandler]
// methods are called by the event loop goroutine; [NodeSync.PublishNodeIPs]
// does a DB request and should be called from the loop goroutine too (it is
// serialized with the handler methods).
type NodeSync struct {
	name   string
	db     ClusterWideDB
	loop   controller.EventLoop
	cfg    Config
	log    *slog.Logger
	broker ProtoBroker
	run    lifecycle.Once

	// nodeID is this node's ID, 0 until ready is closed. It is written
	// with mu held, together with st, and read without it by GetNodeID.
	nodeID atomic.Uint32
	ready  chan struct{} // closed when st.state becomes ready (stateOffline or stateOnline)
	done   chan struct{} // closed when st.state becomes stateEnded

	// mu guards every field below. The handler methods and PublishNodeIPs
	// hold it for their whole run, which serializes them (PublishNodeIPs
	// also across its DB write, bounded by Config.RequestTimeout, which
	// GetAllNodes and Run's state changes may then wait for); Run and the
	// getters hold it briefly, never across I/O or a wait.
	// batchMu guards batch and batchQueued: the record changes the watch
	// received that the loop has not applied yet, and whether a
	// recordChange is in the loop's queue to apply them. It is taken
	// alone, or after mu, never across a DB request or a push.
	batchMu     sync.Mutex
	batch       []WatchEvent
	batchQueued bool
	applied     atomic.Uint64 // record changes taken from the batch (read by tests)

	mu     sync.Mutex
	st     startup // Run's start-up state
	synced bool    // the start-up resync is done
	// records and kube are the two halves of every node's view
	// (compose). Their values are never modified in place: a change
	// replaces the value, so that a composed node shares their slices.
	records   map[string]vswitchRecord
	recRev    int64 // revision of the record snapshot in use
	kube      map[string]kubeInfo
	published IPsWithNetworks // this node's VPP IPs as stored, canonical
}

var (
	_ API                     = (*NodeSync)(nil)
	_ controller.EventHandler = (*NodeSync)(nil)
)

// New returns a NodeSync for the node named nodeName (the Kubernetes node
// name) that stores its records in db and pushes NodeUpdate events into
// loop. It does no I/O and starts no goroutine; call [NodeSync.Run] and
// register the NodeSync as an event handler of loop, before the handlers
// that depend on node IDs.
func New(nodeName string, db ClusterWideDB, loop controller.EventLoop, cfg Config) (*NodeSync, error) {
	var errs []error
	if err := kubemodel.ValidateName(nodeName); err != nil {
		errs = append(errs, fmt.Errorf("nodesync: node name: %w", err))
	}
	if db == nil {
		errs = append(errs, errors.New("nodesync: nil ClusterWideDB"))
	}
	if loop == nil {
		errs = append(errs, errors.New("nodesync: nil EventLoop"))
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &NodeSync{
		name:    nodeName,
		db:      db,
		loop:    loop,
		cfg:     cfg,
		log:     cfg.Logger.With(slog.String("component", "nodesync"), slog.String("node", nodeName)),
		broker:  db.NewBroker(cfg.Prefix),
		ready:   make(chan struct{}),
		done:    make(chan struct{}),
		records: make(map[string]vswitchRecord),
		kube:    make(map[string]kubeInfo),
	}, nil
}

// String returns "nodesync".
func (ns *NodeSync) String() string { return "nodesync" }

// NodeName returns the name of this node.
func (ns *NodeSync) NodeName() string { return ns.name }

// GetNodeID returns this node's ID once [NodeSync.Ready] is closed, and 0
// before: also while the ID is already claimed in the database but Run
// still reads the node records.
func (ns *NodeSync) GetNodeID() uint32 { return ns.nodeID.Load() }

// Ready returns a channel that is closed once Run has what the start-up
// Resync needs: this node's ID and a snapshot of the node records of all
// nodes, both from the database (the ID allocated or confirmed there, the
// records read after it) or, when the database has not answered within
// Config.LocalFallbackDelay, both from Config.LocalState. GetNodeID
// returns the ID from then on. Ready stays closed after Run has ended; it
// never closes if Run fails before (see the errors of [NodeSync.Run]).
func (ns *NodeSync) Ready() <-chan struct{} { return ns.ready }

// Run waits for the DB connection, allocates this node's ID (or finds the
// one it owns already), reads the vswitch node records of all nodes and
// then watches them, pushing their changes into the event loop, until ctx
// is done.
//
// With Config.LocalState, a node that had an ID starts with it when the DB
// has not confirmed it within Config.LocalFallbackDelay (the start-up
// Resync then succeeds with the saved records); once the DB is reachable,
// Run confirms that the claim id/<n> still names this node and continues.
//
// Run returns ctx.Err() after ctx is done and every goroutine it started
// has exited; [ErrNoFreeID] (wrapped) when no ID can be allocated;
// [ErrNodeReleased] (wrapped) when this node's record is deleted while it
// runs or, after a start from local state, its claim is gone;
// [ErrNodeIDLost] (wrapped) when, after a start from local state, another
// node owns the ID; [ErrAlreadyRunning] when called again. DB failures are
// retried with backoff and do not end Run.
func (ns *NodeSync) Run(ctx context.Context) (err error) {
	if err := ns.run.Start("nodesync"); err != nil {
		return err
	}
	start := time.Now()
	ns.enter(stateConnecting)
	var wg sync.WaitGroup
	fctx, stopFallback := context.WithCancel(ctx)
	defer func() {
		stopFallback()
		wg.Wait()
		if err != nil && ctx.Err() != nil && ns.GetNodeID() != 0 {
			ns.saveView() // a clean stop: keep the latest view
		}
		ns.end(err)
	}()

	local, hasLocal := ns.loadLocal()
	if hasLocal {
		wg.Go(func() {
			t := time.NewTimer(ns.cfg.LocalFallbackDelay)
			defer t.Stop()
			select {
			case <-t.C:
				ns.startOffline()
			case <-fctx.Done():
			}
		})
	}

	connected := make(chan struct{})
	var once sync.Once
	ns.db.OnConnect(func() error {
		once.Do(func() { close(connected) })
		return nil
	})
	select {
	case <-connected:
	case <-ctx.Done():
		return ctx.Err()
	}

	var id uint32
	if hasLocal {
		ns.enter(stateConfirming)
		ok, err := ns.confirm(ctx, local.NodeID)
		if err != nil {
			ns.forget(err)
			return err
		}
		if ok {
			id = local.NodeID
		}
	}
	if id == 0 {
		ns.enter(stateAllocating)
		id, _, err = ns.allocate(ctx)
		if err != nil {
			return err
		}
	}
	list, err := ns.listRecords(ctx)
	if err != nil {
		ns.forget(err)
		return err
	}
	ns.saveLocal(id, list)
	if ns.installOnline(id, list, start) {
		return ns.watchRecords(ctx, list.Revision)
	}
	// Started from local state: the loop has the saved records; replace
	// them with the ones just read.
	ns.log.Info("node ID confirmed by the database", slog.Uint64("id", uint64(id)))
	if err := ns.pushResync(ctx, list); err != nil {
		return err
	}
	return ns.watchRecords(ctx, list.Revision)
}

// loadLocal loads the saved state that belongs to this node and has an ID,
// and offers it to the fallback.
func (ns *NodeSync) loadLocal() (SavedState, bool) {
	ls := ns.cfg.LocalState
	if ls == nil {
		ns.setLocal(nil, "no local state (Config.LocalState is nil)")
		return SavedState{}, false
	}
	st, ok, err := ls.Load()
	switch {
	case err != nil:
		ns.log.Warn("cannot load local state", slog.Any("error", err))
		ns.setLocal(nil, fmt.Sprintf("local state %s unreadable: %v", describe(ls), err))
		return SavedState{}, false
	case !ok:
		ns.setLocal(nil, fmt.Sprintf("nothing saved in local state %s", describe(ls)))
		return SavedState{}, false
	case st.Prefix != ns.cfg.Prefix || st.NodeName != ns.name:
		ns.setLocal(nil, fmt.Sprintf("local state %s belongs to node %q under prefix %q", describe(ls), st.NodeName, st.Prefix))
		return SavedState{}, false
	case st.NodeID == 0:
		ns.setLocal(nil, fmt.Sprintf("local state %s holds no node ID", describe(ls)))
		return SavedState{}, false
	}
	ns.setLocal(&st, fmt.Sprintf("local state %s holds node ID %d", describe(ls), st.NodeID))
	return st, true
}

func describe(ls LocalState) string {
	if s, ok := ls.(fmt.Stringer); ok {
		return s.String()
	}
	return fmt.Sprintf("%T", ls)
}

// confirm checks in the DB that this node owns id, the ID from local state,
// and makes its record name it. It reports false if the node does not own
// id and has not used it yet (Run then allocates anew); after a start from
// local state it returns ErrNodeReleased or ErrNodeIDLost instead.
func (ns *NodeSync) confirm(ctx context.Context, id uint32) (bool, error) {
	me := nodeKey(ns.name)
	owned, err := retryDB(ctx, ns, "confirming the node ID", func() (bool, error) {
		res, err := ns.txn(ctx, Txn{Then: []Op{{Type: OpGet, Key: me}, {Type: OpGet, Key: idKey(id)}}})
		if err != nil {
			ns.setDBError(err)
			return false, fmt.Errorf("read claim of ID %d: %w", id, err)
		}
		var owner string
		if kvs := res.Results[1]; len(kvs) == 1 {
			_, owner, _ = parseClaim(kvs[0].Key, kvs[0].Value)
			if owner == "" {
				owner = "?"
			}
		}
		if owner != ns.name {
			return false, backoff.Permanent(ns.lost(id, owner))
		}
		var expect int64
		if kvs := res.Results[0]; len(kvs) == 1 {
			expect = kvs[0].ModRevision
			if rec, err := parseRecord(kvs[0].Key, kvs[0].Value, expect); err == nil && rec.ID == id {
				return true, nil
			}
		}
		// The claim names this node but its record does not say so (a
		// record lost or left pending by an older version): rewrite it.
		a := &allocation{ns: ns, expect: expect}
		if err := a.writeRecord(ctx, id); err != nil {
			ns.setDBError(err)
			return false, err
		}
		return true, nil
	})
	if errors.Is(err, errNotOwned) {
		return false, nil
	}
	return owned, err
}

// errNotOwned tells confirm's caller that the ID from local state is not
// this node's and was never used.
var errNotOwned = errors.New("not owned")

// listRecords reads the node records, retrying DB errors; it fails with
// ErrNodeReleased when this node's record is missing. It reads them once:
// with a broker that is a [PageLister] page by page, a failed page
// retried alone; otherwise whole, retried whole.
func (ns *NodeSync) listRecords(ctx context.Context) (ListResult, error) {
	ns.enter(stateListing)
	pl, ok := ns.broker.(PageLister)
	if !ok {
		return retryDB(ctx, ns, "reading the node records", func() (ListResult, error) {
			lctx, cancel := context.WithTimeout(ctx, ns.cfg.ListTimeout)
			defer cancel()
			list, err := ns.broker.List(lctx, nodeKeyPrefix)
			if err == nil {
				err = ns.checkOwn(list)
			}
			if errors.Is(err, ErrNodeReleased) {
				return ListResult{}, backoff.Permanent(err)
			}
			if err != nil {
				ns.setDBError(err)
			}
			return list, err
		})
	}
	for {
		list, err := ns.listPages(ctx, pl)
		if errors.Is(err, ErrCompacted) && ctx.Err() == nil {
			continue // the first page's revision is gone (rare): start over
		}
		if err != nil {
			return ListResult{}, err
		}
		return list, ns.checkOwn(list)
	}
}

// listPages reads the node records page by page at the revision of the
// first page, retrying a failed page alone; it returns ErrCompacted when
// that revision is compacted away meanwhile.
func (ns *NodeSync) listPages(ctx context.Context, pl PageLister) (ListResult, error) {
	type page struct {
		list ListResult
		more bool
	}
	var list ListResult
	var after string
	for {
		p, err := retryDB(ctx, ns, "reading the node records", func() (page, error) {
			pctx, cancel := context.WithTimeout(ctx, ns.cfg.ListTimeout)
			defer cancel()
			res, more, err := pl.ListPage(pctx, nodeKeyPrefix, after, list.Revision, 0)
			if errors.Is(err, ErrCompacted) {
				return page{}, backoff.Permanent(err)
			}
			if err != nil {
				ns.setDBError(err)
			}
			return page{res, more}, err
		})
		if err != nil {
			return ListResult{}, err
		}
		if list.Revision == 0 {
			list.Revision = p.list.Revision
		}
		list.KVs = append(list.KVs, p.list.KVs...)
		if !p.more || len(p.list.KVs) == 0 {
			return list, nil
		}
		after = p.list.KVs[len(p.list.KVs)-1].Key
	}
}

// checkOwn returns ErrNodeReleased when this node's record is missing from
// list.
func (ns *NodeSync) checkOwn(list ListResult) error {
	me := nodeKey(ns.name)
	if slices.ContainsFunc(list.KVs, func(kv KV) bool { return kv.Key == me }) {
		return nil
	}
	return fmt.Errorf("%w (missing at revision %d)", ErrNodeReleased, list.Revision)
}

// pushResync pushes a record snapshot into the loop, retrying while the
// loop refuses it.
func (ns *NodeSync) pushResync(ctx context.Context, list ListResult) error {
	_, err := retryDB(ctx, ns, "pushing the node records", func() (struct{}, error) {
		return struct{}{}, ns.loop.PushEvent(&recordResync{owner: ns, list: list})
	})
	return err
}

// saveLocal saves the ID and a record snapshot to Config.LocalState.
func (ns *NodeSync) saveLocal(id uint32, list ListResult) {
	if ns.cfg.LocalState == nil {
		return
	}
	err := ns.cfg.LocalState.Save(SavedState{Prefix: ns.cfg.Prefix, NodeName: ns.name, NodeID: id, Records: list})
	if err != nil {
		ns.log.Warn("cannot save local state", slog.Any("error", err))
	}
}

// saveView saves the records as the handler sees them now.
func (ns *NodeSync) saveView() {
	if ns.cfg.LocalState == nil {
		return
	}
	ns.mu.Lock()
	if !ns.synced {
		ns.mu.Unlock()
		return
	}
	list := ListResult{Revision: ns.recRev}
	for _, name := range slices.Sorted(maps.Keys(ns.records)) {
		rec := ns.records[name]
		value, err := proto.Marshal(recordToModel(rec))
		if err != nil {
			continue
		}
		list.KVs = append(list.KVs, KV{Key: nodeKey(name), Value: value, ModRevision: rec.ModRev})
	}
	ns.mu.Unlock()
	ns.saveLocal(ns.GetNodeID(), list)
}

// forget clears the saved ID after it was released or lost.
func (ns *NodeSync) forget(err error) {
	if errors.Is(err, ErrNodeReleased) || errors.Is(err, ErrNodeIDLost) {
		ns.saveLocal(0, ListResult{})
	}
}

// watchRecords runs watch and clears the saved ID if the node is released.
func (ns *NodeSync) watchRecords(ctx context.Context, rev int64) error {
	err := ns.watch(ctx, rev)
	ns.forget(err)
	return err
}

// watch follows the node records from revision rev+1, re-listing them after
// the watch breaks (compaction, connection loss, a full event queue).
func (ns *NodeSync) watch(ctx context.Context, rev int64) error {
	brk := ns.newBackoff() // delay between breaks; reset by every event
	broken := retry.NewDegraded(ns.log, "watching the node records")
	for {
		wctx, cancel := context.WithCancel(ctx)
		var failure error
		err := ns.broker.Watch(wctx, nodeKeyPrefix, rev+1, func(ev WatchEvent) {
			if failure != nil {
				return
			}
			if ev.Key == nodeKey(ns.name) && ev.Deleted() {
				failure = fmt.Errorf("%w (revision %d)", ErrNodeReleased, ev.Revision)
				cancel()
				return
			}
			if err := ns.enqueue(ev); err != nil {
				failure = fmt.Errorf("push record change: %w", err)
				cancel()
				return
			}
			rev = ev.Revision
			brk.Reset()
		})
		cancel()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(failure, ErrNodeReleased) {
			return failure
		}
		if failure != nil {
			err = failure
		}
		// The watch broke: re-list after a backoff and push the records
		// as one snapshot, which supersedes the changes not applied yet.
		ns.dropBatch()
		d := brk.NextBackOff()
		broken.Fail(err, d)
		if err := retry.Sleep(ctx, d); err != nil {
			return err
		}
		list, err := ns.listRecords(ctx)
		if err != nil {
			return err
		}
		if err := ns.pushResync(ctx, list); err != nil {
			return err
		}
		broken.OK()
		ns.saveLocal(ns.GetNodeID(), list)
		rev = list.Revision
	}
}

// HandlesEvent selects resyncs, Kubernetes node changes and the record
// changes pushed by this NodeSync's Run.
func (ns *NodeSync) HandlesEvent(event controller.Event) bool {
	switch ev := event.(type) {
	case *controller.KubeStateChange:
		return ev.Resource == kubemodel.NodeResource
	case *recordChange:
		return ev.owner == ns
	case *recordResync:
		return ev.owner == ns
	}
	m := event.Method()
	return m == controller.FullResync || m == controller.UpstreamResync
}

// Resync rebuilds the node information from the Kubernetes nodes in
// kubeStateData. The first resync (the start-up one) waits until Run has
// the node ID and the node records (see [NodeSync.Ready]) and takes the
// vswitch records from Run's snapshot. It waits at most
// Config.StartupTimeout and no longer than the context of the event
// ([controller.ContextOf] of txn: the loop cancels it when it stops); then
// it returns an error wrapping [ErrNotReady] (and the context's error)
// that says what Run is waiting for. If Run has not been called within
// NotRunningDelay (or StartupTimeout if shorter) it returns an error
// wrapping [ErrNotRunning] and ErrNotReady at once, and if Run has ended,
// ErrNotReady. Later resyncs keep the vswitch records, which Run keeps up
// to date. Resync emits no NodeUpdate events: other handlers resync from
// GetAllNodes.
func (ns *NodeSync) Resync(event controller.Event, kubeStateData controller.KubeStateData, resyncCount int, txn controller.ResyncOperations) error {
	ns.mu.Lock()
	synced := ns.synced
	ns.mu.Unlock()
	var snap ListResult
	if !synced {
		s, err := ns.waitStartup(controller.ContextOf(txn))
		if err != nil {
			return err
		}
		snap = s
	}

	ns.mu.Lock()
	defer ns.mu.Unlock()
	if !ns.synced {
		ns.replaceRecords(snap)
		ns.synced = true
		ns.st.snap = ListResult{} // in the records now; the raw copy is not needed again
	}
	ns.kube = make(map[string]kubeInfo)
	for key, value := range kubeStateData[kubemodel.NodeResource] {
		name, info, ok := ns.kubeNodeFrom(key, value)
		if ok {
			ns.kube[name] = info
		}
	}
	ns.log.Debug("resynced", slog.Int("resyncCount", resyncCount), slog.Int("nodes", len(ns.knownNames())))
	return nil
}

// NotRunningDelay is how long the start-up Resync waits for Run to be
// called before it fails with [ErrNotRunning]: long enough for the
// goroutines of an application that starts the loop and Run together, short
// enough that a forgotten Run is reported within seconds instead of
// blocking the loop for Config.StartupTimeout.
const NotRunningDelay = 2 * time.Second

// waitStartup waits until Run is ready and returns the records for the
// start-up resync; it gives up when Run has ended, has not been called
// within NotRunningDelay, Config.StartupTimeout has passed or ctx is done.
func (ns *NodeSync) waitStartup(ctx context.Context) (ListResult, error) {
	start := time.Now()
	timeout := time.NewTimer(ns.cfg.StartupTimeout)
	defer timeout.Stop()
	notRunning := time.NewTimer(min(NotRunningDelay, ns.cfg.StartupTimeout))
	defer notRunning.Stop()
	var ctxErr error
wait:
	for {
		select {
		case <-ns.ready:
			break wait
		case <-ns.done:
			break wait
		case <-timeout.C:
			break wait
		case <-notRunning.C:
			ns.mu.Lock()
			idle := ns.st.state == stateIdle
			ns.mu.Unlock()
			if idle {
				return ListResult{}, &notRunningError{waited: time.Since(start)}
			}
		case <-ctx.Done():
			ctxErr = ctx.Err()
			break wait
		}
	}
	ns.mu.Lock()
	defer ns.mu.Unlock()
	switch {
	case ns.st.state.ready() || (ns.st.state == stateEnded && isClosed(ns.ready)):
		return ns.st.snap, nil
	case ns.st.state == stateEnded:
		return ListResult{}, fmt.Errorf("%w: Run ended: %v", ErrNotReady, ns.st.err)
	case ctxErr != nil:
		return ListResult{}, fmt.Errorf("%w: the start-up resync stopped waiting: %w (%s)", ErrNotReady, ctxErr, ns.statusTextLocked())
	case ns.st.state == stateIdle:
		return ListResult{}, &notRunningError{waited: time.Since(start)}
	}
	return ListResult{}, fmt.Errorf("%w after waiting %v: %s", ErrNotReady, ns.cfg.StartupTimeout, ns.statusTextLocked())
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// replaceRecords installs a record snapshot; ns.mu is held.
func (ns *NodeSync) replaceRecords(list ListResult) {
	ns.records = make(map[string]vswitchRecord, len(list.KVs))
	for _, kv := range list.KVs {
		rec, err := parseRecord(kv.Key, kv.Value, kv.ModRevision)
		if err != nil {
			ns.log.Warn("skipping malformed node record", slog.Any("error", err))
			continue
		}
		ns.records[rec.Name] = rec
	}
	ns.recRev = list.Revision
	if own, ok := ns.records[ns.name]; ok {
		ns.published = own.IPs
	}
}

// kubeNodeFrom parses a Kubernetes node from the watcher; ok is false for
// malformed entries, which are logged and skipped.
func (ns *NodeSync) kubeNodeFrom(key string, value any) (string, kubeInfo, bool) {
	name, err := kubemodel.ParseNodeKey(key)
	if err != nil {
		ns.log.Warn("skipping Kubernetes node with malformed key", slog.Any("error", err))
		return "", kubeInfo{}, false
	}
	n, ok := value.(*kubemodel.Node)
	if !ok || n == nil {
		ns.log.Warn("skipping Kubernetes node of unexpected type", slog.String("key", key), slog.String("type", fmt.Sprintf("%T", value)))
		return "", kubeInfo{}, false
	}
	if n.GetName() != "" && n.GetName() != name {
		ns.log.Warn("skipping Kubernetes node whose name does not match its key", slog.String("key", key), slog.String("name", n.GetName()))
		return "", kubeInfo{}, false
	}
	info, err := parseKubeNode(n)
	if err != nil {
		ns.log.Warn("ignoring malformed parts of Kubernetes node", slog.Any("error", err))
	}
	return name, info, true
}

// knownNames returns the names of all records and Kubernetes nodes; ns.mu
// is held.
func (ns *NodeSync) knownNames() []string {
	names := make([]string, 0, len(ns.records)+len(ns.kube))
	for n := range ns.records {
		names = append(names, n)
	}
	for n := range ns.kube {
		if _, ok := ns.records[n]; !ok {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names
}

// compose builds the current view of node name, nil if it is not known (no
// claimed ID and no Kubernetes node); ns.mu is held.
func (ns *NodeSync) compose(name string) *Node {
	rec, hasRec := ns.records[name]
	kube, hasKube := ns.kube[name]
	if hasRec && rec.ID == 0 {
		hasRec = false // still joining
	}
	if !hasRec && !hasKube {
		return nil
	}
	// The node shares the slices of the record and the Kubernetes node:
	// none of them is modified in place (a change replaces them), and
	// the nodes leave NodeSync only as copies (GetAllNodes, NodeUpdate).
	n := &Node{Name: name}
	if hasRec {
		n.ID = rec.ID
		n.VppIPAddresses = rec.IPs
	}
	if hasKube {
		n.MgmtIPAddresses = kube.Mgmt
		n.PodCIDRs = kube.PodCIDRs
	}
	return n
}

// Update applies Kubernetes node changes and vswitch record changes and
// pushes a NodeUpdate follow-up event for every node whose state changed in
// a way described at [NodeUpdate].
func (ns *NodeSync) Update(event controller.Event, _ controller.UpdateOperations) (string, error) {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	switch ev := event.(type) {
	case *controller.KubeStateChange:
		name, err := kubemodel.ParseNodeKey(ev.Key)
		if err != nil {
			ns.log.Warn("skipping Kubernetes node with malformed key", slog.Any("error", err))
			return "skipped malformed node key", nil
		}
		prev := ns.compose(name)
		if ev.NewValue == nil {
			delete(ns.kube, name)
		} else {
			n, info, ok := ns.kubeNodeFrom(ev.Key, ev.NewValue)
			if !ok {
				return "skipped malformed Kubernetes node " + ev.Key, nil
			}
			ns.kube[n] = info
		}
		return ns.refresh(name, prev)

	case *recordChange:
		if !ns.synced {
			return "", fmt.Errorf("%w: record change before the start-up resync", ErrNotReady)
		}
		return ns.applyBatch()

	case *recordResync:
		if !ns.synced {
			return "", fmt.Errorf("%w: record resync before the start-up resync", ErrNotReady)
		}
		if ev.list.Revision <= ns.recRev {
			return "stale record snapshot ignored", nil
		}
		old := ns.records
		prevs := make(map[string]*Node, len(old)+len(ns.kube))
		for _, n := range ns.knownNames() {
			prevs[n] = ns.compose(n)
		}
		ns.replaceRecords(ev.list)
		changed := make(map[string]bool)
		for n := range old {
			changed[n] = true
		}
		for n := range ns.records {
			changed[n] = true
		}
		var descs []string
		var errs []error
		for _, n := range slices.Sorted(maps.Keys(changed)) {
			d, err := ns.refresh(n, prevs[n])
			if d != "" {
				descs = append(descs, d)
			}
			errs = append(errs, err)
		}
		return strings.Join(descs, "; "), errors.Join(errs...)
	}
	return "", nil
}

// maxBatch bounds the record changes one recordChange event applies: each
// may push a NodeUpdate follow-up, and the loop bounds those
// (controller.Config.QueueSize).
const maxBatch = 256

// enqueue adds a watched record change to the batch and pushes a
// recordChange unless one is queued already.
func (ns *NodeSync) enqueue(ev WatchEvent) error {
	ns.batchMu.Lock()
	ns.batch = append(ns.batch, ev)
	queued := ns.batchQueued
	ns.batchQueued = true
	ns.batchMu.Unlock()
	if queued {
		return nil
	}
	if err := ns.loop.PushEvent(&recordChange{owner: ns}); err != nil {
		ns.batchMu.Lock()
		ns.batchQueued = false
		ns.batchMu.Unlock()
		return err
	}
	return nil
}

// dropBatch forgets the changes not applied yet (a record snapshot read
// afterwards supersedes them).
func (ns *NodeSync) dropBatch() {
	ns.batchMu.Lock()
	ns.batch = nil
	ns.batchMu.Unlock()
}

// batchDescription describes the changes waiting.
func (ns *NodeSync) batchDescription() string {
	ns.batchMu.Lock()
	defer ns.batchMu.Unlock()
	return fmt.Sprintf("%d changes waiting", len(ns.batch))
}

// applyBatch applies up to maxBatch waiting record changes, in order, and
// pushes another recordChange (a follow-up) when more wait; ns.mu is held.
func (ns *NodeSync) applyBatch() (string, error) {
	ns.batchMu.Lock()
	n := min(len(ns.batch), maxBatch)
	evs := slices.Clone(ns.batch[:n])
	ns.batch = ns.batch[n:]
	if len(ns.batch) == 0 {
		ns.batch = nil
		ns.batchQueued = false
	}
	more := ns.batchQueued
	ns.batchMu.Unlock()
	ns.applied.Add(uint64(n))
	var descs []string
	var errs []error
	for _, ev := range evs {
		d, err := ns.applyRecordEvent(ev)
		if d != "" {
			descs = append(descs, d)
		}
		errs = append(errs, err)
	}
	if more {
		if err := ns.loop.PushEvent(&recordChange{owner: ns}); err != nil {
			// The next change the watch receives pushes again; until
			// then the rest waits. Say so: the view lags.
			ns.batchMu.Lock()
			ns.batchQueued = false
			ns.batchMu.Unlock()
			errs = append(errs, fmt.Errorf("nodesync: push the rest of the record changes: %w", err))
		}
	}
	desc := fmt.Sprintf("%d record changes, %d nodes updated", len(evs), len(descs))
	if len(evs) == 1 {
		desc = strings.Join(descs, "; ")
	}
	return desc, errors.Join(errs...)
}

// applyRecordEvent applies one watched record change; ns.mu is held.
func (ns *NodeSync) applyRecordEvent(ev WatchEvent) (string, error) {
	name, ok := strings.CutPrefix(ev.Key, nodeKeyPrefix)
	if !ok || name == "" {
		return "", nil
	}
	if ev.Revision <= ns.recRev {
		return "", nil // already in the snapshot
	}
	if cur, ok := ns.records[name]; ok && ev.Revision <= cur.ModRev {
		return "", nil // already applied (our own write)
	}
	prev := ns.compose(name)
	if ev.Deleted() {
		delete(ns.records, name)
	} else {
		rec, err := parseRecord(ev.Key, ev.Value, ev.Revision)
		if err != nil {
			ns.log.Warn("skipping malformed node record", slog.Any("error", err))
			delete(ns.records, name) // an unreadable record tells nothing valid
		} else {
			ns.records[name] = rec
		}
	}
	return ns.refresh(name, prev)
}

// refresh pushes a NodeUpdate when the change of node name from prev (its
// view before the change, composed before the records or Kubernetes nodes
// changed) is one to report; ns.mu is held.
func (ns *NodeSync) refresh(name string, prev *Node) (string, error) {
	next := ns.compose(name)
	if !reportable(prev, next, name == ns.name) {
		return "", nil
	}
	ev := &NodeUpdate{NodeName: name, PrevState: prev.Clone(), NewState: next.Clone()}
	if err := ns.loop.PushEvent(ev); err != nil {
		return "", fmt.Errorf("nodesync: push NodeUpdate for %s: %w", name, err)
	}
	return ev.String(), nil
}

// reportable tells whether the change from prev to next of a node deserves
// a NodeUpdate.
func reportable(prev, next *Node, self bool) bool {
	if !self {
		return !prev.Equal(next)
	}
	var p, n Node
	if prev != nil {
		p = *prev
	}
	if next != nil {
		n = *next
	}
	return !mgmtEqual(p.MgmtIPAddresses, n.MgmtIPAddresses) || !slices.Equal(p.PodCIDRs, n.PodCIDRs)
}

// Revert is a no-op: NodeSync handles only BestEffort events.
func (ns *NodeSync) Revert(controller.Event) error { return nil }

// GetAllNodes returns a copy of the information about all known nodes
// (node name -> node info): nodes whose vswitch agent has claimed an ID and
// nodes that Kubernetes knows. It is empty before the start-up resync.
func (ns *NodeSync) GetAllNodes() Nodes {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	if !ns.synced {
		return Nodes{}
	}
	out := make(Nodes, len(ns.records)+len(ns.kube))
	for _, name := range ns.knownNames() {
		if n := ns.compose(name); n != nil {
			out[name] = n.Clone()
		}
	}
	return out
}

// PublishNodeIPs publishes the VPP-side addresses of this node of the given
// IP version, replacing the previously published ones of that version
// (addresses of the other version are kept). The order of addresses and
// duplicates do not matter. It writes to the DB (bounded by
// Config.RequestTimeout) only when the set really changed, so it is cheap to
// call on every resync. It returns ErrNotReady before the start-up resync,
// and an error naming the bad entry when an address is invalid, not of the
// given version, or outside its network, and ErrNotReady after Run has
// ended.
func (ns *NodeSync) PublishNodeIPs(addresses IPsWithNetworks, version IPVersion) error {
	return ns.PublishNodeIPsContext(context.Background(), addresses, version)
}

// PublishNodeIPsContext is [NodeSync.PublishNodeIPs] under ctx: an event
// handler passes the context of its event ([controller.ContextOf] of its
// transaction), so that the write ends with the event (CONTRIBUTING R6).
// The write is also bounded by Config.RequestTimeout.
func (ns *NodeSync) PublishNodeIPsContext(ctx context.Context, addresses IPsWithNetworks, version IPVersion) error {
	if version != IPv4 && version != IPv6 {
		return fmt.Errorf("nodesync: publish node IPs: invalid IP version %v", version)
	}
	for _, a := range addresses {
		if err := a.Validate(); err != nil {
			return fmt.Errorf("nodesync: publish node IPs: %w", err)
		}
		if !version.Matches(a.Address) || !version.Matches(a.Network.Addr()) {
			return fmt.Errorf("nodesync: publish node IPs: %s is not an %v address", a, version)
		}
	}
	ns.mu.Lock()
	defer ns.mu.Unlock()
	if ns.st.state == stateEnded {
		// Never write after Run has ended: the record may have been
		// released, and writing it would resurrect a freed ID.
		return fmt.Errorf("nodesync: publish node IPs: %w: Run has ended: %v", ErrNotReady, ns.st.err)
	}
	if !ns.synced {
		return fmt.Errorf("nodesync: publish node IPs: %w", ErrNotReady)
	}
	other := IPv4
	if version == IPv4 {
		other = IPv6
	}
	next := append(ns.published.Filter(other), addresses...).Canonical()
	if next.Equal(ns.published) {
		return nil
	}
	rec := vswitchRecord{ID: ns.GetNodeID(), Name: ns.name, IPs: next}
	ctx, cancel := context.WithTimeout(ctx, ns.cfg.RequestTimeout)
	defer cancel()
	rev, err := ns.broker.Put(ctx, nodeKey(ns.name), recordToModel(rec))
	if err != nil {
		return fmt.Errorf("nodesync: publish node IPs: %w", err)
	}
	rec.ModRev = rev
	ns.published = next
	if cur, ok := ns.records[ns.name]; !ok || cur.ModRev < rev {
		ns.records[ns.name] = rec
	}
	ns.log.Debug("published node IPs", slog.String("version", version.String()), slog.String("ips", next.String()))
	return nil
}
