package etcddb

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/vswitchkit/vswitchkit/internal/cfgutil"
	"github.com/vswitchkit/vswitchkit/internal/lifecycle"
	"github.com/vswitchkit/vswitchkit/internal/retry"
	"github.com/vswitchkit/vswitchkit/nodesync"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"
)

// Config configures a [DB]. Only Endpoints is required (for [New]); every
// other field has a documented default. Config is a plain value, copied by
// New; it is safe for concurrent use as long as nobody modifies it.
type Config struct {
	// Endpoints are the etcd client URLs, e.g. "https://10.0.0.1:2379".
	Endpoints []string

	// DialTimeout bounds each connection attempt of Run. Default: 5s;
	// negative is an error (as for every duration of Config).
	DialTimeout time.Duration

	// RequestTimeout bounds PutIfNotExists (which takes no context).
	// Default: 10s.
	RequestTimeout time.Duration

	// Username and Password enable etcd authentication when Username is set.
	Username string
	Password string

	// TLS enables TLS (client certificates, CA pool) when non-nil.
	TLS *tls.Config

	// Logger receives the log output. Default: discard. The etcd client's
	// own zap logging is always discarded.
	Logger *slog.Logger

	// RetryBackoff is the initial delay between connection attempts of Run;
	// it doubles up to 5s, with ±50% jitter so that agents that lost etcd
	// together do not reconnect together. Default: 100ms.
	RetryBackoff time.Duration

	// ListPageSize is the number of keys one request of
	// [nodesync.ProtoBroker.List] (and of a ListPage without a limit)
	// reads: a large range is read in pages of this size, all at the
	// revision of the first page, so that neither the server nor the
	// client holds a whole large response at once. Default: 1000;
	// negative is an error.
	ListPageSize int64
}

func (c Config) withDefaults(needEndpoints bool) (Config, error) {
	var errs []error
	if needEndpoints && len(c.Endpoints) == 0 {
		errs = append(errs, errors.New("no endpoints"))
	}
	errs = append(errs, cfgutil.Durations([]cfgutil.Duration{
		{Name: "DialTimeout", Value: &c.DialTimeout, Default: 5 * time.Second},
		{Name: "RequestTimeout", Value: &c.RequestTimeout, Default: 10 * time.Second},
		{Name: "RetryBackoff", Value: &c.RetryBackoff, Default: 100 * time.Millisecond},
	})...)
	pageSize := int(min(c.ListPageSize, math.MaxInt32))
	errs = append(errs, cfgutil.Ints([]cfgutil.Int{{Name: "ListPageSize", Value: &pageSize, Default: 1000}})...)
	c.ListPageSize = int64(pageSize)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if err := errors.Join(errs...); err != nil {
		return c, fmt.Errorf("etcddb: invalid config: %w", err)
	}
	return c, nil
}

// DB is a [nodesync.ClusterWideDB] backed by etcd. It is safe for
// concurrent use.
type DB struct {
	cfg  Config
	log  *slog.Logger
	run  lifecycle.Once
	owns bool // the client is created (and closed) by Run

	mu        sync.Mutex
	cli       *clientv3.Client // nil until connected; guarded by mu
	connected bool
	closed    bool
	callbacks []func() error
}

var _ nodesync.ClusterWideDB = (*DB)(nil)

// New returns a DB that connects to cfg.Endpoints when [DB.Run] is called.
// It does no I/O.
func New(cfg Config) (*DB, error) {
	cfg, err := cfg.withDefaults(true)
	if err != nil {
		return nil, err
	}
	return &DB{cfg: cfg, log: cfg.Logger.With(slog.String("component", "etcddb")), owns: true}, nil
}

// NewFromClient returns a DB that uses cli, which the caller keeps owning
// (Close does not close it). The DB counts as connected at once; Run need
// not be called. cfg.Endpoints, TLS and credentials are ignored.
func NewFromClient(cli *clientv3.Client, cfg Config) (*DB, error) {
	if cli == nil {
		return nil, errors.New("etcddb: nil client")
	}
	cfg, err := cfg.withDefaults(false)
	if err != nil {
		return nil, err
	}
	return &DB{cfg: cfg, log: cfg.Logger.With(slog.String("component", "etcddb")), cli: cli, connected: true}, nil
}

// Run connects to etcd (retrying with backoff until the first request
// succeeds), calls the OnConnect callbacks, and blocks until ctx is done.
// Then it closes the client and returns ctx.Err(). It returns an error at
// once if the DB has been closed. For a DB made by
// NewFromClient it only waits for ctx. A second call returns an error
// wrapping [ErrAlreadyRunning].
func (db *DB) Run(ctx context.Context) error {
	if err := db.run.Start("etcddb"); err != nil {
		return err
	}
	if !db.owns {
		<-ctx.Done()
		return ctx.Err()
	}
	deg := retry.NewDegraded(db.log, "connecting to etcd")
	_, err := backoff.Retry(ctx, func() (struct{}, error) {
		err := db.connect(ctx)
		if errors.Is(err, errClosed) {
			return struct{}{}, backoff.Permanent(err)
		}
		return struct{}{}, err
	}, backoff.WithBackOff(retry.NewClientBackoff(db.cfg.RetryBackoff, 5*time.Second)), backoff.WithMaxElapsedTime(0), backoff.WithNotify(deg.Fail))
	if err == nil {
		deg.OK()
	}
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return err
	}
	<-ctx.Done()
	if err := db.Close(); err != nil {
		db.log.Warn("closing etcd client failed", slog.Any("error", err))
	}
	return ctx.Err()
}

// connect makes one attempt to create the client and to complete a request.
func (db *DB) connect(ctx context.Context) error {
	db.mu.Lock()
	closed := db.closed
	db.mu.Unlock()
	if closed {
		return errClosed
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   db.cfg.Endpoints,
		DialTimeout: db.cfg.DialTimeout,
		Username:    db.cfg.Username,
		Password:    db.cfg.Password,
		TLS:         db.cfg.TLS,
		Logger:      zap.NewNop(),
		Context:     ctx,
	})
	if err != nil {
		return err
	}
	pctx, cancel := context.WithTimeout(ctx, db.cfg.DialTimeout)
	_, err = cli.Get(pctx, "/", clientv3.WithCountOnly())
	cancel()
	var etcdErr rpctypes.EtcdError
	if err != nil && !errors.As(err, &etcdErr) { // a server's refusal still proves the connection
		_ = cli.Close()
		return err
	}
	db.mu.Lock()
	if db.closed {
		db.mu.Unlock()
		_ = cli.Close()
		return errClosed
	}
	db.cli = cli
	db.connected = true
	cbs := db.callbacks
	db.callbacks = nil
	db.mu.Unlock()
	db.log.Info("connected to etcd", slog.Any("endpoints", db.cfg.Endpoints))
	for _, cb := range cbs {
		if err := cb(); err != nil {
			db.log.Warn("OnConnect callback failed", slog.Any("error", err))
		}
	}
	return nil
}

// OnConnect calls callback now (synchronously) if the DB is connected,
// otherwise once Run has connected. Callback errors are logged.
func (db *DB) OnConnect(callback func() error) {
	db.mu.Lock()
	if !db.connected {
		db.callbacks = append(db.callbacks, callback)
		db.mu.Unlock()
		return
	}
	db.mu.Unlock()
	if err := callback(); err != nil {
		db.log.Warn("OnConnect callback failed", slog.Any("error", err))
	}
}

// Close closes the client (unless it came from NewFromClient). Operations
// fail with nodesync.ErrNotConnected afterwards. Later calls return nil.
func (db *DB) Close() error {
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.closed {
		return nil
	}
	db.closed = true
	cli := db.cli
	db.cli = nil
	db.connected = false
	if cli != nil && db.owns {
		return cli.Close()
	}
	return nil
}

func (db *DB) client() (*clientv3.Client, error) {
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.cli == nil {
		if db.closed {
			return nil, fmt.Errorf("%w: closed", nodesync.ErrNotConnected)
		}
		return nil, nodesync.ErrNotConnected
	}
	return db.cli, nil
}

// PutIfNotExists creates key with value in one compare-create transaction
// (bounded by Config.RequestTimeout).
func (db *DB) PutIfNotExists(key string, value []byte) (bool, error) {
	cli, err := db.client()
	if err != nil {
		return false, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), db.cfg.RequestTimeout)
	defer cancel()
	resp, err := cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(value))).
		Commit()
	if err != nil {
		return false, fmt.Errorf("etcddb: put if not exists %s: %w", key, err)
	}
	return resp.Succeeded, nil
}

// NewBroker returns a broker for keys under prefix.
func (db *DB) NewBroker(prefix string) nodesync.ProtoBroker {
	return &broker{db: db, prefix: prefix}
}

type broker struct {
	db     *DB
	prefix string
}

func (b *broker) Put(ctx context.Context, key string, value proto.Message) (int64, error) {
	cli, err := b.db.client()
	if err != nil {
		return 0, err
	}
	data, err := proto.Marshal(value)
	if err != nil {
		return 0, fmt.Errorf("etcddb: encode %s: %w", key, err)
	}
	resp, err := cli.Put(ctx, b.prefix+key, string(data))
	if err != nil {
		return 0, fmt.Errorf("etcddb: put %s: %w", b.prefix+key, err)
	}
	return resp.Header.GetRevision(), nil
}

// List reads the range in pages of Config.ListPageSize keys, every page at
// the revision of the first one, so the result is one consistent snapshot.
func (b *broker) List(ctx context.Context, keyPrefix string) (nodesync.ListResult, error) {
	var res nodesync.ListResult
	var after string
	for {
		page, more, err := b.ListPage(ctx, keyPrefix, after, res.Revision, 0)
		if err != nil {
			return nodesync.ListResult{}, err
		}
		if res.Revision == 0 {
			res.Revision = page.Revision
			res.KVs = page.KVs
		} else {
			res.KVs = append(res.KVs, page.KVs...)
		}
		if !more || len(page.KVs) == 0 {
			return res, nil
		}
		after = page.KVs[len(page.KVs)-1].Key
	}
}

var _ nodesync.PageLister = (*broker)(nil)

// ListPage reads one page of a range (see [nodesync.PageLister]); limit 0
// means Config.ListPageSize.
func (b *broker) ListPage(ctx context.Context, keyPrefix, after string, revision, limit int64) (nodesync.ListResult, bool, error) {
	cli, err := b.db.client()
	if err != nil {
		return nodesync.ListResult{}, false, err
	}
	full := b.prefix + keyPrefix
	start := full
	if after != "" {
		start = b.prefix + after + "\x00"
	}
	if limit <= 0 {
		limit = b.db.cfg.ListPageSize
	}
	opts := []clientv3.OpOption{clientv3.WithRange(clientv3.GetPrefixRangeEnd(full)), clientv3.WithLimit(limit)}
	if revision > 0 {
		opts = append(opts, clientv3.WithRev(revision))
	}
	resp, err := cli.Get(ctx, start, opts...)
	if err != nil {
		if errors.Is(err, rpctypes.ErrCompacted) {
			return nodesync.ListResult{}, false, fmt.Errorf("%w: list %s at revision %d: %v", nodesync.ErrCompacted, full, revision, err)
		}
		return nodesync.ListResult{}, false, fmt.Errorf("etcddb: list %s: %w", full, err)
	}
	res := nodesync.ListResult{Revision: revision, KVs: make([]nodesync.KV, 0, len(resp.Kvs))}
	if revision == 0 {
		res.Revision = resp.Header.GetRevision()
	}
	for _, kv := range resp.Kvs {
		res.KVs = append(res.KVs, b.kv(kv))
	}
	return res, resp.More && len(resp.Kvs) > 0, nil
}

func (b *broker) kv(kv *mvccpb.KeyValue) nodesync.KV {
	return nodesync.KV{
		Key:            string(kv.Key[len(b.prefix):]),
		Value:          nonNil(kv.Value),
		CreateRevision: kv.CreateRevision,
		ModRevision:    kv.ModRevision,
		Version:        kv.Version,
	}
}

// Txn runs txn as one etcd transaction.
func (b *broker) Txn(ctx context.Context, txn nodesync.Txn) (nodesync.TxnResult, error) {
	cli, err := b.db.client()
	if err != nil {
		return nodesync.TxnResult{}, err
	}
	cmps := make([]clientv3.Cmp, 0, len(txn.If))
	for _, c := range txn.If {
		full := b.prefix + c.Key
		var cmp clientv3.Cmp
		switch c.Target {
		case nodesync.CreateRevision:
			cmp = clientv3.Compare(clientv3.CreateRevision(full), "=", c.Revision)
		case nodesync.ModRevision:
			cmp = clientv3.Compare(clientv3.ModRevision(full), "=", c.Revision)
		default:
			return nodesync.TxnResult{}, fmt.Errorf("etcddb: txn: unknown compare target %d", c.Target)
		}
		if c.Prefix {
			cmp = cmp.WithPrefix()
		}
		cmps = append(cmps, cmp)
	}
	then, err := b.ops(txn.Then)
	if err != nil {
		return nodesync.TxnResult{}, err
	}
	els, err := b.ops(txn.Else)
	if err != nil {
		return nodesync.TxnResult{}, err
	}
	resp, err := cli.Txn(ctx).If(cmps...).Then(then...).Else(els...).Commit()
	if err != nil {
		if errors.Is(err, rpctypes.ErrCompacted) {
			return nodesync.TxnResult{}, fmt.Errorf("%w: txn under %s: %v", nodesync.ErrCompacted, b.prefix, err)
		}
		return nodesync.TxnResult{}, fmt.Errorf("etcddb: txn under %s: %w", b.prefix, err)
	}
	res := nodesync.TxnResult{Succeeded: resp.Succeeded, Revision: resp.Header.GetRevision(), Results: make([][]nodesync.KV, len(resp.Responses))}
	for i, r := range resp.Responses {
		rr := r.GetResponseRange()
		if rr == nil {
			continue
		}
		kvs := make([]nodesync.KV, 0, len(rr.Kvs))
		for _, kv := range rr.Kvs {
			kvs = append(kvs, b.kv(kv))
		}
		res.Results[i] = kvs
	}
	return res, nil
}

func (b *broker) ops(in []nodesync.Op) ([]clientv3.Op, error) {
	out := make([]clientv3.Op, 0, len(in))
	for _, op := range in {
		full := b.prefix + op.Key
		switch op.Type {
		case nodesync.OpGet:
			var opts []clientv3.OpOption
			if op.Prefix {
				opts = append(opts, clientv3.WithPrefix())
				if op.Limit > 0 {
					opts = append(opts, clientv3.WithLimit(op.Limit))
				}
			}
			if op.Revision > 0 {
				opts = append(opts, clientv3.WithRev(op.Revision))
			}
			out = append(out, clientv3.OpGet(full, opts...))
		case nodesync.OpPut:
			out = append(out, clientv3.OpPut(full, string(op.Value)))
		case nodesync.OpDelete:
			out = append(out, clientv3.OpDelete(full))
		default:
			return nil, fmt.Errorf("etcddb: txn: unknown op type %d", op.Type)
		}
	}
	return out, nil
}

func (b *broker) Delete(ctx context.Context, key string, modRevision int64) (bool, error) {
	cli, err := b.db.client()
	if err != nil {
		return false, err
	}
	full := b.prefix + key
	if modRevision <= 0 {
		resp, err := cli.Delete(ctx, full)
		if err != nil {
			return false, fmt.Errorf("etcddb: delete %s: %w", full, err)
		}
		return resp.Deleted > 0, nil
	}
	resp, err := cli.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(full), "=", modRevision)).
		Then(clientv3.OpDelete(full)).
		Commit()
	if err != nil {
		return false, fmt.Errorf("etcddb: delete %s: %w", full, err)
	}
	return resp.Succeeded, nil
}

func (b *broker) Watch(ctx context.Context, keyPrefix string, fromRevision int64, fn func(nodesync.WatchEvent)) error {
	cli, err := b.db.client()
	if err != nil {
		return err
	}
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	full := b.prefix + keyPrefix
	ch := cli.Watch(wctx, full, clientv3.WithPrefix(), clientv3.WithRev(fromRevision))
	for resp := range ch {
		if resp.CompactRevision != 0 {
			return fmt.Errorf("%w: revision %d (compacted up to %d)", nodesync.ErrCompacted, fromRevision, resp.CompactRevision)
		}
		if err := resp.Err(); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("etcddb: watch %s: %w", full, err)
		}
		for _, ev := range resp.Events {
			we := nodesync.WatchEvent{Key: string(ev.Kv.Key[len(b.prefix):]), Revision: ev.Kv.ModRevision}
			if ev.Type == clientv3.EventTypePut {
				we.Value = nonNil(ev.Kv.Value)
			}
			fn(we)
			fromRevision = ev.Kv.ModRevision + 1
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return fmt.Errorf("etcddb: watch %s closed", full)
}

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}
