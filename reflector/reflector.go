package reflector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/internal/lifecycle"
	"github.com/vswitchkit/vswitchkit/internal/retry"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
)

// Reflector writes Kubernetes objects, converted to their models, into etcd
// while it is the elected leader among its replicas, and keeps etcd equal
// to its informers' caches.
//
// Reflector is safe for concurrent use: Run is called once; Stats may be
// called at any time from any goroutine.
type Reflector struct {
	cfg    Config
	client *clientv3.Client
	res    []*resState
	log    *slog.Logger

	run lifecycle.Once
	// etcdFailing: the latest etcd request failed (an outage is being
	// logged); used by the Run goroutine only.
	etcdFailing bool

	mu     sync.Mutex
	dirty  []map[string]struct{} // per resource: item IDs to re-examine; guarded by mu
	relist []bool                // per resource: a re-list happened; guarded by mu
	wake   chan struct{}         // capacity 1: dirty or relist changed

	leader                       atomic.Bool
	elections, txns, writeErrors atomic.Uint64
	reconciles, lostLeadership   atomic.Uint64
	campaignErrors               atomic.Uint64
	lastReconcile                atomic.Int64   // nanoseconds
	hookCommitted                func(ops []op) // test hook: after a transaction committed
}

// resState is a resource with its counters and, while Run runs, its
// informer.
type resState struct {
	Resource
	idx    int
	prefix string // Config.Prefix + KeyPrefix
	// nodePrefix is Config.Prefix + NodeKeyPrefix, empty for a resource
	// stored under its keys.
	nodePrefix string

	events, puts, deletes, badReports atomic.Uint64
	objects, bad                      atomic.Int64
	apiErrors                         atomic.Uint64
	lastAPIError                      atomic.Pointer[string]

	cache *store       // set by Run before the informers start; shared with SharedWith
	lists atomic.Int64 // full lists (Replace) of the cache

	// Owned by the writer (the Run goroutine).
	written map[string][]byte // relative key -> value as in etcd, while leader
	badSet  map[string]string // item ID -> reason it cannot be reflected
	// keys holds, for a resource stored per node, the key each item's
	// value is stored under (it depends on the object's node, which is
	// unknown once the object is gone).
	keys map[string]string
}

// New returns a reflector that writes through client (which stays owned
// by the caller: Run does not close it) the objects of resources (see
// [KubernetesResources]; further resources may follow). It validates cfg
// and the resources and does no I/O.
func New(client *clientv3.Client, resources []Resource, cfg Config) (*Reflector, error) {
	if client == nil {
		return nil, errors.New("reflector: nil etcd client")
	}
	cfg, err := cfg.withDefaults()
	var errs []error
	if err != nil {
		errs = append(errs, err)
	}
	if len(resources) == 0 {
		errs = append(errs, errors.New("no resources"))
	}
	r := &Reflector{cfg: cfg, client: client, wake: make(chan struct{}, 1)}
	names := map[string]bool{}
	for i := range resources {
		res := resources[i]
		errs = append(errs, res.validate()...)
		if names[res.Name] {
			errs = append(errs, fmt.Errorf("resource %q: duplicate name", res.Name))
		}
		names[res.Name] = true
		if res.SharedWith != "" {
			j := slices.IndexFunc(resources[:i], func(o Resource) bool { return o.Name == res.SharedWith })
			switch {
			case j < 0:
				errs = append(errs, fmt.Errorf("resource %q: SharedWith %q is not an earlier resource", res.Name, res.SharedWith))
			case resources[j].SharedWith != "" || resources[j].merged:
				errs = append(errs, fmt.Errorf("resource %q: SharedWith %q, which does not have an informer of its own to share", res.Name, res.SharedWith))
			}
		}
		overlap := func(a, b string) bool {
			return a != "" && b != "" && (strings.HasPrefix(a, b) || strings.HasPrefix(b, a))
		}
		if overlap(res.KeyPrefix, res.NodeKeyPrefix) {
			errs = append(errs, fmt.Errorf("resource %q: key prefix %q and node key prefix %q overlap", res.Name, res.KeyPrefix, res.NodeKeyPrefix))
		}
		for _, o := range resources[:i] {
			for _, a := range []string{o.KeyPrefix, o.NodeKeyPrefix} {
				for _, b := range []string{res.KeyPrefix, res.NodeKeyPrefix} {
					if overlap(a, b) {
						errs = append(errs, fmt.Errorf("resources %q and %q: key prefixes %q and %q overlap", o.Name, res.Name, a, b))
					}
				}
			}
		}
		full := kubemodel.EtcdKey(cfg.Prefix, res.KeyPrefix)
		if res.KeyPrefix != "" && (strings.HasPrefix(cfg.ElectionPrefix, full) || strings.HasPrefix(full, cfg.ElectionPrefix)) {
			errs = append(errs, fmt.Errorf("ElectionPrefix %q overlaps the keys of resource %q", cfg.ElectionPrefix, res.Name))
		}
		rs := &resState{Resource: res, idx: i, prefix: full}
		if res.NodeKeyPrefix != "" {
			rs.nodePrefix = kubemodel.EtcdKey(cfg.Prefix, res.NodeKeyPrefix)
			rs.keys = map[string]string{}
			if strings.HasPrefix(cfg.ElectionPrefix, rs.nodePrefix) || strings.HasPrefix(rs.nodePrefix, cfg.ElectionPrefix) {
				errs = append(errs, fmt.Errorf("ElectionPrefix %q overlaps the keys of resource %q", cfg.ElectionPrefix, res.Name))
			}
		}
		r.res = append(r.res, rs)
		r.dirty = append(r.dirty, map[string]struct{}{})
		r.relist = append(r.relist, false)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("reflector: %w", err)
	}
	r.log = cfg.Logger.With(slog.String("component", "reflector"))
	return r, nil
}

// Stats is a snapshot of the reflector's state and counters, all since New.
// A Stats value is a copy: it is safe for concurrent use.
type Stats struct {
	// Leader tells whether this replica currently holds the leadership
	// (and is the only one writing).
	Leader bool
	// Elections counts the times this replica became leader; LostLeadership
	// the leadership terms that ended other than by Run returning (the
	// session expired, or a fenced write was refused).
	Elections, LostLeadership uint64
	// Txns counts committed write transactions; WriteErrors failed etcd
	// requests (writes and reconcile reads), each followed by a full
	// reconcile after a backoff.
	Txns, WriteErrors uint64
	// CampaignErrors counts failed attempts to campaign for leadership
	// (the lease, the session or the election could not be had: etcd
	// unreachable), each retried after a backoff.
	CampaignErrors uint64
	// Reconciles counts completed reconciles (full, or of one resource
	// after a re-list); LastReconcile is the duration of the latest one.
	Reconciles    uint64
	LastReconcile time.Duration
	// Puts and Deletes are the sums over Resources.
	Puts, Deletes uint64
	// Resources holds the counters of each resource by name.
	Resources map[string]ResourceStats
}

// ResourceStats are the counters of one resource, a copy (safe for
// concurrent use).
type ResourceStats struct {
	// Events counts informer notifications: adds, updates and deletes,
	// and each object of a full list.
	Events uint64
	// Objects is the number of this resource's keys in etcd, as known to
	// the leader (kept by the replica while it leads).
	Objects int
	// Puts and Deletes count the keys written and deleted by this replica.
	Puts, Deletes uint64
	// BadObjects is the number of objects currently not reflected because
	// they cannot be converted; BadReports counts each time an object
	// became bad or its problem changed (each such report is logged at
	// Warn). Conversion is done by the leader only.
	BadObjects int
	BadReports uint64
	// Relists counts full lists of the informer after the first one; each
	// one is followed by a reconcile of the resource.
	Relists uint64
	// APIErrors counts the failed list and watch requests of the
	// resource's informer (each one retried), and LastAPIError is the
	// latest one's message ("" if none), e.g. a 403 naming the
	// permission the reflector's identity lacks.
	APIErrors    uint64
	LastAPIError string
}

// Stats returns the current state and counters.
func (r *Reflector) Stats() Stats {
	s := Stats{
		Leader:         r.leader.Load(),
		Elections:      r.elections.Load(),
		LostLeadership: r.lostLeadership.Load(),
		Txns:           r.txns.Load(),
		WriteErrors:    r.writeErrors.Load(),
		CampaignErrors: r.campaignErrors.Load(),
		Reconciles:     r.reconciles.Load(),
		LastReconcile:  time.Duration(r.lastReconcile.Load()),
		Resources:      make(map[string]ResourceStats, len(r.res)),
	}
	for _, rs := range r.res {
		st := ResourceStats{
			Events:     rs.events.Load(),
			Objects:    int(rs.objects.Load()),
			Puts:       rs.puts.Load(),
			Deletes:    rs.deletes.Load(),
			BadObjects: int(rs.bad.Load()),
			BadReports: rs.badReports.Load(),
			Relists:    uint64(max(rs.lists.Load()-1, 0)),
			APIErrors:  rs.apiErrors.Load(),
		}
		if e := rs.lastAPIError.Load(); e != nil {
			st.LastAPIError = *e
		}
		s.Puts += st.Puts
		s.Deletes += st.Deletes
		s.Resources[rs.Name] = st
	}
	return s
}

// Run starts an informer per resource, waits until every cache has synced,
// and then campaigns for leadership; as leader it reconciles etcd with the
// caches and then writes every change, until the leadership is lost (it
// campaigns again) or ctx is done. etcd errors are retried with backoff and
// followed by a full reconcile; they are counted in [Stats], never
// returned. An etcd outage is logged at Warn when it starts (the first
// failed request) and at Info when it ends, not per retry.
//
// Run returns ctx.Err() after cancellation, or an error wrapping
// [ErrAlreadyRunning] when called before; never nil. Before
// it returns it gives up the leadership (revoking its lease, so that
// another replica takes over at once) and waits for every goroutine it
// started, the informers included.
func (r *Reflector) Run(ctx context.Context) error {
	if err := r.run.Start("reflector"); err != nil {
		return err
	}
	identity := r.cfg.Identity
	if identity == "" {
		host, err := os.Hostname()
		if err != nil {
			host = "reflector"
		}
		identity = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	ictx, stopInformers := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		stopInformers()
		wg.Wait()
	}()
	var synced []cache.InformerSynced
	var own []*resState
	for _, rs := range r.res {
		if rs.SharedWith != "" {
			owner := r.res[slices.IndexFunc(r.res, func(o *resState) bool { return o.Name == rs.SharedWith })]
			rs.cache = owner.cache
			rs.cache.feeds = append(rs.cache.feeds, rs)
		} else {
			rs.cache = newStore(r, rs)
			own = append(own, rs)
			synced = append(synced, rs.cache.synced.Load)
		}
	}
	for _, rs := range own { // after every sharer is known: a relist marks them all
		refl := r.newClientReflector(rs)
		wg.Go(func() { refl.RunWithContext(ictx) })
	}
	r.log.Info("reflector started", slog.String("prefix", r.cfg.Prefix), slog.String("identity", identity), slog.Int("resources", len(r.res)))
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return ctx.Err()
	}
	r.log.Info("informer caches synced")
	bo := r.newBackoff()
	for {
		err := r.lead(ctx, identity)
		if ctx.Err() != nil {
			r.log.Info("reflector stopped")
			return ctx.Err()
		}
		if errors.Is(err, errLostLeadership) {
			r.lostLeadership.Add(1)
			r.log.Warn("leadership lost; campaigning again")
			bo.Reset()
			continue
		}
		r.campaignErrors.Add(1)
		r.etcdFailed("cannot campaign for leadership; retrying", err)
		if err := retry.Sleep(ctx, bo.NextBackOff()); err != nil {
			r.log.Info("reflector stopped")
			return err
		}
	}
}

func (r *Reflector) newBackoff() *backoff.ExponentialBackOff {
	return retry.NewBackoff(r.cfg.RetryMinBackoff, r.cfg.RetryMaxBackoff)
}

// newClientReflector builds the client-go reflector that lists and
// watches rs into its cache, through a list-watch that counts and logs
// failed requests, with a backoff between attempts from
// Config.RetryMinBackoff to Config.APIRetryMaxBackoff.
func (r *Reflector) newClientReflector(rs *resState) *cache.Reflector {
	return cache.NewReflectorWithOptions(newCountingListWatch(rs.ListWatch, r, rs), rs.Object, rs.cache, cache.ReflectorOptions{
		Name:            "vswitchkit reflector " + rs.Name,
		TypeDescription: rs.Name,
		Backoff: &wait.Backoff{
			Duration: r.cfg.RetryMinBackoff, Factor: 2, Jitter: 0.2, Cap: r.cfg.APIRetryMaxBackoff,
			Steps: math.MaxInt32,
		},
	})
}

func (r *Reflector) signal() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// markDirty records item IDs of rs to be re-examined by the writer.
func (r *Reflector) markDirty(rs *resState, ids ...string) {
	if len(ids) == 0 {
		return
	}
	r.mu.Lock()
	for _, id := range ids {
		r.dirty[rs.idx][id] = struct{}{}
	}
	r.mu.Unlock()
	r.signal()
}

// take removes and returns the pending work: dirty item IDs per resource
// and the resources to reconcile after a re-list (whose dirty IDs are
// dropped: the reconcile covers them).
func (r *Reflector) take() (dirty [][]string, relist []bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	dirty = make([][]string, len(r.res))
	relist = make([]bool, len(r.res))
	for i := range r.res {
		if r.relist[i] {
			relist[i] = true
			r.relist[i] = false
		} else {
			for id := range r.dirty[i] {
				dirty[i] = append(dirty[i], id)
			}
		}
		if len(r.dirty[i]) > 0 {
			r.dirty[i] = map[string]struct{}{}
		}
	}
	return dirty, relist
}

// dropDirty forgets the dirty IDs and re-lists of the resources in which
// (all when which is nil); the caller is about to reconcile them.
func (r *Reflector) dropDirty(which []bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range r.res {
		if which == nil || which[i] {
			r.relist[i] = false
			if len(r.dirty[i]) > 0 {
				r.dirty[i] = map[string]struct{}{}
			}
		}
	}
}

// lead campaigns for leadership and, once elected, writes until the
// leadership or ctx ends. It returns errLostLeadership when the term ended
// while ctx is still alive.
func (r *Reflector) lead(ctx context.Context, identity string) error {
	gctx, cancel := context.WithTimeout(ctx, r.cfg.WriteTimeout)
	lease, err := r.client.Grant(gctx, int64(r.cfg.sessionTTLSeconds()))
	cancel()
	if err != nil {
		return fmt.Errorf("grant lease: %w", err)
	}
	sess, err := concurrency.NewSession(r.client, concurrency.WithLease(lease.ID),
		concurrency.WithTTL(r.cfg.sessionTTLSeconds()), concurrency.WithContext(ctx))
	if err != nil {
		r.revoke(ctx, lease.ID)
		return fmt.Errorf("start session: %w", err)
	}
	defer func() {
		sess.Orphan() // stops the keep-alive and waits for its goroutine
		r.revoke(ctx, lease.ID)
	}()
	el := concurrency.NewElection(sess, r.cfg.ElectionPrefix)
	if err := el.Campaign(sess.Ctx(), identity); err != nil {
		if ctx.Err() == nil && sess.Ctx().Err() != nil {
			return errLostLeadership
		}
		return fmt.Errorf("campaign: %w", err)
	}
	// Every write transaction carries this comparison: it only applies
	// while this replica's election key is the one it created, so a
	// replica that lost the leadership (its lease expired or was revoked,
	// and another replica may already lead) can no longer write.
	fence := clientv3.Compare(clientv3.CreateRevision(el.Key()), "=", el.Rev())
	r.elections.Add(1)
	r.leader.Store(true)
	defer r.leader.Store(false)
	r.etcdAnswers()
	r.log.Info("elected leader", slog.String("key", el.Key()))
	err = r.leaderLoop(sess.Ctx(), fence)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// revoke gives up lease id, so that the election key goes at once; it is
// best effort (the lease expires on its own otherwise), with a context that
// outlives ctx's cancellation.
func (r *Reflector) revoke(ctx context.Context, id clientv3.LeaseID) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.WriteTimeout)
	defer cancel()
	if _, err := r.client.Revoke(rctx, id); err != nil {
		r.log.Debug("cannot revoke the election lease", slog.Any("error", err))
	}
}

// leaderLoop runs one leadership term on lctx, which ends with the term:
// a full reconcile, then the changes as they come, then again a full
// reconcile after any failed write.
func (r *Reflector) leaderLoop(lctx context.Context, fence clientv3.Cmp) error {
	bo := r.newBackoff()
	needFull := true
	for {
		if needFull {
			err := r.reconcile(lctx, fence, nil)
			switch {
			case errors.Is(err, errLostLeadership), lctx.Err() != nil:
				return errLostLeadership
			case err != nil:
				r.writeErrors.Add(1)
				r.etcdFailed("reconcile failed; retrying", err)
				if retry.Sleep(lctx, bo.NextBackOff()) != nil {
					return errLostLeadership
				}
				continue
			}
			needFull = false
			bo.Reset()
			r.etcdAnswers()
		}
		select {
		case <-lctx.Done():
			return errLostLeadership
		case <-r.wake:
		}
		dirty, relist := r.take()
		var err error
		for i, rl := range relist {
			if rl && err == nil {
				which := make([]bool, len(r.res))
				which[i] = true
				err = r.reconcile(lctx, fence, which)
			}
		}
		if err == nil {
			err = r.flush(lctx, fence, dirty)
		}
		switch {
		case errors.Is(err, errLostLeadership), lctx.Err() != nil:
			return errLostLeadership
		case err != nil:
			r.writeErrors.Add(1)
			r.etcdFailed("write failed; reconciling after backoff", err)
			needFull = true
			if retry.Sleep(lctx, bo.NextBackOff()) != nil {
				return errLostLeadership
			}
		}
	}
}

// etcdFailed logs a failed etcd request: at Warn when it starts an
// outage, at Debug while the outage lasts.
func (r *Reflector) etcdFailed(msg string, err error) {
	if r.etcdFailing {
		r.log.Debug(msg, slog.Any("error", err))
		return
	}
	r.etcdFailing = true
	r.log.Warn(msg, slog.Any("error", err))
}

// etcdAnswers notes a successful etcd request: it ends an outage.
func (r *Reflector) etcdAnswers() {
	if r.etcdFailing {
		r.etcdFailing = false
		r.log.Info("etcd answers again")
	}
}
