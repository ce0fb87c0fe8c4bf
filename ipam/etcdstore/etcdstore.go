package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/internal/cfgutil"
	"github.com/vswitchkit/vswitchkit/internal/lifecycle"
	"github.com/vswitchkit/vswitchkit/internal/retry"
	"github.com/vswitchkit/vswitchkit/ipam"
	"github.com/vswitchkit/vswitchkit/ipam/internal/record"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Defaults of [Config].
const (
	// DefaultPrefix is the default Config.Prefix.
	DefaultPrefix = "/vswitchkit/ipam/"
	// DefaultLeaseTTL is the default Config.LeaseTTL. It is long because
	// an etcd saturated by thousands of agents starting at once answers
	// keep-alives late: with 15 s, 5000 simulated agents' leases expired
	// 19,568 times in one cold start (each taken again: half of etcd's CPU
	// in that storm). A restarted agent does not wait for it when the
	// store has a Config.LeaseFile.
	DefaultLeaseTTL = 60 * time.Second
)

// Config configures a [Store]. The zero value is valid. A Config is a plain
// value, copied by New.
type Config struct {
	// Prefix is the root of all nodes' records; it must end with "/".
	// Default [DefaultPrefix].
	Prefix string
	// LeaseTTL is the TTL of the lease that holds the node's owner key,
	// rounded up to whole seconds (etcd's unit). A crashed agent's
	// successor waits at most this long; after an etcd outage longer than
	// this the lease has expired and the store takes the records again,
	// unless another agent took them meanwhile. Default [DefaultLeaseTTL];
	// at least 2s.
	LeaseTTL time.Duration
	// Identity is stored in the owner key, so that a waiting agent can log
	// who holds the records, and tells this store's keys from another
	// agent's when it takes them again after its lease expired: it must
	// differ between agents that may run for the same node. Default
	// "<hostname>/<pid>".
	Identity string
	// LeaseFile, when set, is a file in which the store keeps the ID of
	// its lease, so that its successor on the same node — an agent
	// restarted after a crash, which finds the file — takes over the
	// lease and the owner key at once instead of waiting up to LeaseTTL
	// for them to expire. Only one store may use the file at a time: put
	// it in a directory that one agent of the node holds (the agent's
	// state directory, which it locks). Default: none.
	LeaseFile string
	// Logger receives the store's logs. Default: discard.
	Logger *slog.Logger
}

// listPage is the number of records ListAllocations reads per request.
const listPage = 1000

// Store is an [ipam.Store] that keeps one node's pod IP allocations in
// etcd. See the package documentation for the layout and the fencing.
//
// Store is safe for concurrent use.
type Store struct {
	cli       *clientv3.Client
	node      string
	ownerKey  string // Prefix + node
	recPrefix string // Prefix + node + "/"
	ttl       int64  // seconds
	identity  string // set by New or, if empty, by Run before it acquires the records
	leaseFile string
	log       *slog.Logger
	pageSize  int64

	run   lifecycle.Once
	owned chan struct{} // closed when Run acquired the records
	lost  chan struct{} // closed when the store stops owning them (or Run returned)

	mu        sync.Mutex
	createRev int64         // guarded by mu; create revision of our owner key, set before owned is closed
	modRev    int64         // guarded by mu; mod revision of the owner key after this store's last write
	lostErr   error         // guarded by mu; set when lost is closed
	retaken   chan struct{} // guarded by mu; closed and replaced when Run retakes the owner key
	retaking  bool          // guarded by mu; Run is checking its lease or taking the key again (setRetaking)
}

var _ ipam.Store = (*Store)(nil)

// New returns a Store for the records of node nodeName on cli. It does no
// I/O; call [Store.Run] to acquire the records. cli stays the caller's.
func New(cli *clientv3.Client, nodeName string, cfg Config) (*Store, error) {
	var errs []error
	if cli == nil {
		errs = append(errs, errors.New("nil etcd client"))
	}
	if nodeName == "" || strings.Contains(nodeName, "/") {
		errs = append(errs, fmt.Errorf("node name %q: must be non-empty and contain no '/'", nodeName))
	}
	if cfg.Prefix == "" {
		cfg.Prefix = DefaultPrefix
	} else if !strings.HasSuffix(cfg.Prefix, "/") {
		errs = append(errs, fmt.Errorf("field Prefix %q: must end with '/'", cfg.Prefix))
	}
	if ttlErrs := cfgutil.Durations([]cfgutil.Duration{{Name: "LeaseTTL", Value: &cfg.LeaseTTL, Default: DefaultLeaseTTL}}); len(ttlErrs) > 0 {
		errs = append(errs, ttlErrs...)
	} else if cfg.LeaseTTL < 2*time.Second {
		errs = append(errs, fmt.Errorf("field LeaseTTL %s: must be at least 2s", cfg.LeaseTTL))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("etcdstore: invalid config: %w", err)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Store{
		cli:       cli,
		node:      nodeName,
		ownerKey:  cfg.Prefix + nodeName,
		recPrefix: cfg.Prefix + nodeName + "/",
		ttl:       int64((cfg.LeaseTTL + time.Second - 1) / time.Second),
		identity:  cfg.Identity,
		leaseFile: cfg.LeaseFile,
		log:       cfg.Logger.With(slog.String("component", "ipam-etcdstore"), slog.String("node", nodeName)),
		pageSize:  listPage,
		owned:     make(chan struct{}),
		lost:      make(chan struct{}),
		retaken:   make(chan struct{}),
	}, nil
}

// Owned returns a channel that is closed once Run has acquired the node's
// records.
func (s *Store) Owned() <-chan struct{} { return s.owned }

// Lost returns a channel that is closed when the store stops owning the
// node's records: ownership was lost (see [ErrOwnershipLost]) or Run
// returned. From then on every call fails; [Store.Err] tells why.
func (s *Store) Lost() <-chan struct{} { return s.lost }

// Err returns why the store stopped owning the records (wrapping
// [ErrOwnershipLost]), or nil while it has not.
func (s *Store) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lostErr
}

// lose marks the store as no longer owning the records (once).
func (s *Store) lose(err error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lostErr == nil {
		s.lostErr = err
		close(s.lost)
		level := slog.LevelWarn
		if errors.Is(err, errStopped) {
			level = slog.LevelInfo
		}
		s.log.Log(context.Background(), level, "ownership of the node's IPAM records ended", slog.Any("reason", err))
	}
	return s.lostErr
}

// Run acquires the node's records and keeps them until ctx is done or
// ownership is lost (a lease that expired while no other agent took the
// records is taken again: see the package documentation). While another agent owns them it waits (logging who
// does); etcd errors are retried with exponential backoff from 100ms up to
// 5s with ±50% jitter (so that agents do not retry in waves), logged when
// they start and when they end. On return it revokes its lease, which
// deletes the owner key so that the next agent can take the records at
// once. Run returns ctx.Err() when ctx ends, an error wrapping
// [ErrOwnershipLost] when ownership is lost, and an error wrapping
// [ErrAlreadyRunning] if called more than once.
func (s *Store) Run(ctx context.Context) error {
	if err := s.run.Start("etcdstore"); err != nil {
		return err
	}
	if s.identity == "" {
		host, _ := os.Hostname()
		s.identity = host + "/" + strconv.Itoa(os.Getpid())
	}
	lease, err := s.acquire(ctx)
	if err != nil {
		s.lose(fmt.Errorf("%w: %w before acquiring them: %w", ErrOwnershipLost, errStopped, err))
		return err
	}
	s.saveLease(lease)
	defer func() { // the lease held when Run returns
		if s.revoke(lease) && s.leaseFile != "" {
			_ = os.Remove(s.leaseFile)
		}
	}()
	kctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ka, err := s.cli.KeepAlive(kctx, lease)
	if err != nil {
		return s.lose(fmt.Errorf("%w: keep the lease alive: %w", ErrOwnershipLost, err))
	}
	close(s.owned)
	s.log.Info("acquired the node's IPAM records", slog.String("ownerKey", s.ownerKey))
	deg := retry.NewDegraded(s.log, "keeping the IPAM records' lease alive")
	for {
		select {
		case _, ok := <-ka:
			if ok {
				deg.OK()
				continue
			}
			if ctx.Err() != nil {
				s.lose(fmt.Errorf("%w: %w", ErrOwnershipLost, errStopped))
				return ctx.Err()
			}
			// The client stopped keeping the lease alive: etcd said it
			// expired, or did not answer a keep-alive in time (the
			// first one within the client's dial timeout, later ones
			// within the TTL), which an overloaded etcd does while the
			// lease lives on. Ask etcd which.
			s.setRetaking(true)
			alive, err := s.leaseAlive(ctx, lease, deg)
			if errors.Is(err, errClientClosed) {
				return s.lose(fmt.Errorf("%w: %w", ErrOwnershipLost, err))
			}
			if err != nil {
				s.lose(fmt.Errorf("%w: %w", ErrOwnershipLost, errStopped))
				return err
			}
			if !alive {
				// The lease expired (etcd did not hear a keep-alive
				// within the TTL: an overloaded etcd, a long pause):
				// the owner key is gone with it. Take it again if no
				// other agent took it in between.
				next, err := s.retake(ctx)
				if err != nil {
					return s.lose(fmt.Errorf("%w: lease %x expired: %w", ErrOwnershipLost, int64(lease), err))
				}
				s.log.Warn("the lease of the node's IPAM records expired; no other agent took them: retook them",
					slog.String("ownerKey", s.ownerKey))
				lease = next
				s.saveLease(lease)
			}
			s.setRetaking(false)
			if ka, err = s.cli.KeepAlive(kctx, lease); err != nil {
				return s.lose(fmt.Errorf("%w: keep the lease alive: %w", ErrOwnershipLost, err))
			}
		case <-s.lost:
			return s.Err()
		case <-ctx.Done():
			s.lose(fmt.Errorf("%w: %w", ErrOwnershipLost, errStopped))
			return ctx.Err()
		}
	}
}

// setRetaking records whether Run is finding out whether its lease
// expired and taking the key again (writes waiting for it then wait for
// its verdict however long it takes; see awaitRetake).
func (s *Store) setRetaking(on bool) {
	s.mu.Lock()
	s.retaking = on
	s.mu.Unlock()
}

// leaseAlive asks etcd whether lease still lives, retrying (with backoff,
// each request bounded by the lease TTL) until etcd answers or ctx ends;
// deg reports the episode.
func (s *Store) leaseAlive(ctx context.Context, lease clientv3.LeaseID, deg *retry.Degraded) (bool, error) {
	bo := retry.NewClientBackoff(100*time.Millisecond, 5*time.Second)
	for {
		if s.cli.Ctx().Err() != nil {
			return false, errClientClosed
		}
		tctx, cancel := context.WithTimeout(ctx, time.Duration(s.ttl)*time.Second)
		resp, err := s.cli.TimeToLive(tctx, lease)
		cancel()
		if err == nil {
			alive := resp.TTL > 0
			if alive {
				deg.Fail(errors.New("no keep-alive answer in time; the lease lives: keeping it alive again"), 0)
			}
			return alive, nil
		}
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return false, nil
		}
		d := bo.NextBackOff()
		deg.Fail(fmt.Errorf("is the lease alive: %w", err), d)
		if err := retry.Sleep(ctx, d); err != nil {
			return false, err
		}
	}
}

// retake creates the owner key again with a new lease after this store's
// lease expired, and keeps it only if no other agent owned the key in
// between: the key's history from this store's last write to the new
// key may hold this store's own writes and the key's deletion, nothing
// else (another agent's owner key would be a put with another create
// revision). Writes waiting for the verdict go on with the new key.
func (s *Store) retake(ctx context.Context) (clientv3.LeaseID, error) {
	s.mu.Lock()
	create, from := s.createRev, s.modRev
	s.mu.Unlock()
	// etcd errors are retried: the etcd that let the lease expire is
	// likely overloaded still (a new lease can expire before the key is
	// put on it). An attempt whose outcome was unknown is revoked; its
	// key, if it was put, carries this store's identity (see ownedAlone).
	bo := retry.NewClientBackoff(100*time.Millisecond, 5*time.Second)
	var lease clientv3.LeaseID
	var rev int64
	for {
		l, r, holder, err := s.createOwnerKey(ctx)
		if err == nil && l != 0 {
			lease, rev = l, r
			break
		}
		if err == nil && holder != s.identity {
			return 0, fmt.Errorf("another agent (%s) owns them now", holder)
		}
		if err == nil {
			// A key of this store's own: an earlier attempt whose answer
			// was lost and whose revoke failed too. It goes with its
			// lease; try again.
			err = errors.New("an earlier attempt's owner key is still there")
		}
		if ctx.Err() != nil || s.cli.Ctx().Err() != nil {
			return 0, fmt.Errorf("creating the owner key again: %w", err)
		}
		d := bo.NextBackOff()
		s.log.Debug("creating the owner key again failed, retrying", slog.Duration("in", d), slog.Any("error", err))
		if err := retry.Sleep(ctx, d); err != nil {
			return 0, err
		}
	}
	if err := s.ownedAlone(ctx, create, from, rev); err != nil {
		s.revoke(lease)
		return 0, err
	}
	s.mu.Lock()
	s.createRev, s.modRev = rev, rev
	close(s.retaken)
	s.retaken = make(chan struct{})
	s.mu.Unlock()
	return lease, nil
}

// ownedAlone reads the owner key's history after revision from up to
// revision until and returns an error if another agent's owner key (a
// create revision other than create, and another identity: a key of this
// store's with another create revision is one of its own attempts in
// retake) appears in it, or if the history cannot be read (compacted).
func (s *Store) ownedAlone(ctx context.Context, create, from, until int64) error {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	for wr := range s.cli.Watch(wctx, s.ownerKey, clientv3.WithRev(from+1)) {
		if err := wr.Err(); err != nil {
			return fmt.Errorf("reading the owner key's history: %w", err)
		}
		for _, ev := range wr.Events {
			if ev.Kv.ModRevision >= until {
				return nil
			}
			if ev.Type == mvccpb.PUT && ev.Kv.CreateRevision != create && string(ev.Kv.Value) != s.identity {
				return fmt.Errorf("another agent (%s) owned them meanwhile", ev.Kv.Value)
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return errors.New("the watch of the owner key's history ended")
}

// revoke revokes the lease (deleting the owner key if it is still ours),
// with a fresh context: Run's may be done.
func (s *Store) revoke(lease clientv3.LeaseID) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := s.cli.Revoke(ctx, lease); err != nil {
		s.log.Debug("revoking the lease failed; the owner key expires with it", slog.Any("error", err))
		return false
	}
	return true
}

// saveLease records lease in Config.LeaseFile (if set), replacing the
// file at once (a crash leaves the old one or the new one).
func (s *Store) saveLease(lease clientv3.LeaseID) {
	if s.leaseFile == "" {
		return
	}
	tmp := s.leaseFile + ".tmp"
	err := os.WriteFile(tmp, []byte(strconv.FormatInt(int64(lease), 16)+"\n"), 0o600)
	if err == nil {
		err = os.Rename(tmp, s.leaseFile)
	}
	if err != nil {
		s.log.Warn("recording the lease failed; a restarted agent waits for it to expire", slog.String("file", s.leaseFile), slog.Any("error", err))
	}
}

// adopt takes over the lease recorded in Config.LeaseFile by this
// node's previous store when the owner key is still on it and it lives:
// the previous agent crashed (it revokes its lease and removes the file
// when it stops). ok is false when there is nothing to adopt; errors
// only mean that the store acquires the records as usual.
func (s *Store) adopt(ctx context.Context) (lease clientv3.LeaseID, ok bool) {
	if s.leaseFile == "" {
		return 0, false
	}
	raw, err := os.ReadFile(s.leaseFile)
	if err != nil {
		return 0, false
	}
	id, err := strconv.ParseInt(strings.TrimSpace(string(raw)), 16, 64)
	if err != nil || id == 0 {
		s.log.Warn("ignoring an unreadable lease file", slog.String("file", s.leaseFile))
		return 0, false
	}
	lease = clientv3.LeaseID(id)
	resp, err := s.cli.Get(ctx, s.ownerKey)
	if err != nil || len(resp.Kvs) == 0 || clientv3.LeaseID(resp.Kvs[0].Lease) != lease {
		return 0, false
	}
	ttl, err := s.cli.TimeToLive(ctx, lease)
	if err != nil || ttl.TTL <= 0 {
		return 0, false
	}
	s.mu.Lock()
	s.createRev, s.modRev = resp.Kvs[0].CreateRevision, resp.Kvs[0].ModRevision
	s.mu.Unlock()
	s.log.Info("took over the lease of this node's previous agent", slog.String("previous", string(resp.Kvs[0].Value)),
		slog.String("file", s.leaseFile))
	return lease, true
}

// acquire waits until the owner key is free and creates it with a new
// lease. It returns only when it owns the key or ctx is done.
func (s *Store) acquire(ctx context.Context) (clientv3.LeaseID, error) {
	if lease, ok := s.adopt(ctx); ok {
		return lease, nil
	}
	bo := retry.NewClientBackoff(100*time.Millisecond, 5*time.Second)
	deg := retry.NewDegraded(s.log, "acquiring the node's IPAM records")
	wait := func(what string, err error) error {
		d := bo.NextBackOff()
		deg.Fail(fmt.Errorf("%s: %w", what, err), d)
		return retry.Sleep(ctx, d)
	}
	for {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		free, err := s.waitFree(ctx)
		if err != nil {
			if rerr := wait("waiting for the owner key", err); rerr != nil {
				return 0, rerr
			}
			continue
		}
		if !free {
			continue
		}
		lease, rev, _, err := s.createOwnerKey(ctx)
		if err != nil {
			if rerr := wait("creating the owner key", err); rerr != nil {
				return 0, rerr
			}
			continue
		}
		if lease == 0 {
			continue // taken meanwhile: wait for it again
		}
		s.mu.Lock()
		s.createRev, s.modRev = rev, rev
		s.mu.Unlock()
		deg.OK()
		return lease, nil
	}
}

// createOwnerKey creates the owner key on a new lease if no owner key
// exists, and returns the lease and the key's create revision; when a
// key exists it returns lease 0 and the identity of its holder (read in
// the same transaction). On failure or refusal it revokes the
// lease, which also removes the key if a failed request was applied
// after all.
func (s *Store) createOwnerKey(ctx context.Context) (lease clientv3.LeaseID, rev int64, holder string, err error) {
	g, err := s.cli.Grant(ctx, s.ttl)
	if err != nil {
		return 0, 0, "", fmt.Errorf("granting a lease: %w", err)
	}
	resp, err := s.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(s.ownerKey), "=", 0)).
		Then(clientv3.OpPut(s.ownerKey, s.identity, clientv3.WithLease(g.ID))).
		Else(clientv3.OpGet(s.ownerKey)).
		Commit()
	if err != nil || !resp.Succeeded {
		s.revoke(g.ID)
		if err == nil {
			if kvs := resp.Responses[0].GetResponseRange().GetKvs(); len(kvs) > 0 {
				holder = string(kvs[0].Value)
			}
		}
		return 0, 0, holder, err
	}
	return g.ID, resp.Header.Revision, "", nil
}

// waitFree returns true at once if the owner key does not exist; otherwise
// it waits until the key is deleted and returns false (the caller checks
// again).
func (s *Store) waitFree(ctx context.Context) (bool, error) {
	resp, err := s.cli.Get(ctx, s.ownerKey)
	if err != nil {
		return false, err
	}
	if len(resp.Kvs) == 0 {
		return true, nil
	}
	s.log.Warn("the node's IPAM records are owned by another agent; waiting until it releases them or its lease expires",
		slog.String("owner", string(resp.Kvs[0].Value)), slog.String("ownerKey", s.ownerKey))
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	for wr := range s.cli.Watch(wctx, s.ownerKey, clientv3.WithRev(resp.Header.Revision+1)) {
		if err := wr.Err(); err != nil {
			return false, err
		}
		for _, ev := range wr.Events {
			if ev.Type == mvccpb.DELETE {
				return false, nil
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return false, err
	}
	return false, errors.New("watch of the owner key ended")
}

// wait blocks until the store owns the records or ctx is done.
func (s *Store) wait(ctx context.Context) error {
	select {
	case <-s.lost:
		return s.Err()
	default:
	}
	select {
	case <-s.owned:
	case <-s.lost:
		return s.Err()
	case <-ctx.Done():
		return fmt.Errorf("%w (node %s): %w", ErrNotOwner, s.node, ctx.Err())
	}
	select {
	case <-s.lost:
		return s.Err()
	default:
		return nil
	}
}

// write applies op in a transaction fenced by the owner key (see the
// package documentation) and bumps the owner key's mod revision.
func (s *Store) write(ctx context.Context, op clientv3.Op) error {
	if err := s.wait(ctx); err != nil {
		return err
	}
	for attempt := 0; ; attempt++ {
		s.mu.Lock()
		create, mod := s.createRev, s.modRev
		s.mu.Unlock()
		resp, err := s.cli.Txn(ctx).
			If(
				clientv3.Compare(clientv3.CreateRevision(s.ownerKey), "=", create),
				clientv3.Compare(clientv3.ModRevision(s.ownerKey), "=", mod),
			).
			Then(op, clientv3.OpPut(s.ownerKey, s.identity, clientv3.WithIgnoreLease())).
			Else(clientv3.OpGet(s.ownerKey)).
			Commit()
		if err != nil {
			return err // outcome unknown; the next write settles the order
		}
		if resp.Succeeded {
			s.advance(resp.Header.Revision)
			return nil
		}
		kvs := resp.Responses[0].GetResponseRange().GetKvs()
		if len(kvs) == 0 || kvs[0].CreateRevision != create {
			if err := s.notOurKey(ctx, create, kvs); err != nil {
				return err
			}
			continue
		}
		// Still ours, but written since our last write we know of: an
		// earlier write of ours whose outcome we did not learn, or a
		// concurrent call. Retry from the current revision.
		s.advance(kvs[0].ModRevision)
		if attempt == 100 {
			return fmt.Errorf("etcdstore: write of %s conflicts with concurrent writes, giving up", s.ownerKey)
		}
	}
}

// notOurKey handles a fenced request refused because the owner key
// (kvs: what etcd holds now, if anything) is not the one with create
// revision create. Deleted (the lease expired: Run takes it again if no
// other agent took it; or an operator deleted it), or created again by
// this store's Run (its identity) and not yet confirmed: it waits for
// Run's verdict (see awaitRetake) and returns nil to try again. Another
// agent's key: ownership is lost.
func (s *Store) notOurKey(ctx context.Context, create int64, kvs []*mvccpb.KeyValue) error {
	if len(kvs) > 0 && string(kvs[0].Value) != s.identity {
		return s.lose(fmt.Errorf("%w: the owner key %s was taken over", ErrOwnershipLost, s.ownerKey))
	}
	return s.awaitRetake(ctx, create)
}

// awaitRetake waits until Run has retaken the owner key whose create
// revision was create (nil: the write is tried again), the store lost it,
// or ctx ends; or, unless Run is taking the key again meanwhile, until
// two lease TTLs passed (the key stays deleted: lost).
func (s *Store) awaitRetake(ctx context.Context, create int64) error {
	s.mu.Lock()
	retaken, cur := s.retaken, s.createRev
	s.mu.Unlock()
	if cur != create {
		return nil
	}
	t := time.NewTicker(2 * time.Duration(s.ttl) * time.Second)
	defer t.Stop()
	for {
		select {
		case <-retaken:
			return nil
		case <-s.lost:
			return s.Err()
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			// While Run is taking the key again (its retries may take
			// longer under the overload that let the lease expire), its
			// verdict is awaited; otherwise the key was deleted while
			// the lease lives (an operator): lost.
			s.mu.Lock()
			retaking := s.retaking
			s.mu.Unlock()
			if !retaking {
				return s.lose(fmt.Errorf("%w: the owner key %s was deleted", ErrOwnershipLost, s.ownerKey))
			}
		}
	}
}

// advance records rev as the owner key's mod revision, if newer.
func (s *Store) advance(rev int64) {
	s.mu.Lock()
	s.modRev = max(s.modRev, rev)
	s.mu.Unlock()
}

// PutAllocation writes the record of a.Pod in one fenced transaction.
func (s *Store) PutAllocation(ctx context.Context, a ipam.Allocation) error {
	k, err := record.Key(a.Pod)
	if err != nil {
		return fmt.Errorf("etcdstore: put: %w", err)
	}
	if !a.Addr.IsValid() {
		return fmt.Errorf("etcdstore: put %s: invalid address", a.Pod)
	}
	if err := s.write(ctx, clientv3.OpPut(s.recPrefix+k, string(record.AppendValue(nil, a.Addr, a.ContainerID)))); err != nil {
		return fmt.Errorf("etcdstore: put %s: %w", a.Pod, err)
	}
	return nil
}

// DeleteAllocation deletes the record of pod in one fenced transaction; a
// missing record is not an error.
func (s *Store) DeleteAllocation(ctx context.Context, pod kubemodel.PodID) error {
	k, err := record.Key(pod)
	if err != nil {
		return fmt.Errorf("etcdstore: delete: %w", err)
	}
	if err := s.write(ctx, clientv3.OpDelete(s.recPrefix+k)); err != nil {
		return fmt.Errorf("etcdstore: delete %s: %w", pod, err)
	}
	return nil
}

// ListAllocations returns the node's records, read in pages while the
// store owns them. Records it cannot decode are logged and skipped (and
// left in etcd).
func (s *Store) ListAllocations(ctx context.Context) ([]ipam.Allocation, error) {
	if err := s.wait(ctx); err != nil {
		return nil, fmt.Errorf("etcdstore: list: %w", err)
	}
	s.mu.Lock()
	create := s.createRev
	s.mu.Unlock()
	end := clientv3.GetPrefixRangeEnd(s.recPrefix)
	from := s.recPrefix
	var out []ipam.Allocation
	for {
		resp, err := s.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(s.ownerKey), "=", create)).
			Then(clientv3.OpGet(from, clientv3.WithRange(end), clientv3.WithLimit(s.pageSize))).
			Else(clientv3.OpGet(s.ownerKey)).
			Commit()
		if err != nil {
			return nil, fmt.Errorf("etcdstore: list: %w", err)
		}
		if !resp.Succeeded {
			// As for a write; then list again from the start.
			if err := s.notOurKey(ctx, create, resp.Responses[0].GetResponseRange().GetKvs()); err != nil {
				return nil, fmt.Errorf("etcdstore: list: %w", err)
			}
			s.mu.Lock()
			create = s.createRev
			s.mu.Unlock()
			from, out = s.recPrefix, out[:0]
			continue
		}
		r := resp.Responses[0].GetResponseRange()
		for _, kv := range r.GetKvs() {
			a, err := record.Parse(strings.TrimPrefix(string(kv.Key), s.recPrefix), kv.Value)
			if err != nil {
				s.log.Warn("skipping an undecodable IPAM record", slog.String("key", string(kv.Key)), slog.Any("error", err))
				continue
			}
			out = append(out, a)
		}
		if !r.GetMore() || len(r.GetKvs()) == 0 {
			return out, nil
		}
		from = string(r.Kvs[len(r.Kvs)-1].Key) + "\x00"
	}
}
