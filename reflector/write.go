package reflector

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/cache"

	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
)

var marshalOpts = proto.MarshalOptions{Deterministic: true}

// serviceIndex indexes endpoint slices by "namespace/service".
const serviceIndex = "service"

func sliceService(obj any) (string, bool) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	s, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return "", false
	}
	svc, ok := s.Labels[discoveryv1.LabelServiceName]
	if !ok || svc == "" {
		return "", false
	}
	return s.Namespace + "/" + svc, true
}

func sliceServiceIndex(obj any) ([]string, error) {
	if id, ok := sliceService(obj); ok {
		return []string{id}, nil
	}
	return nil, nil
}

// stripManagedFields is the caches' transform.
func stripManagedFields(obj any) (any, error) {
	if a, err := meta.Accessor(obj); err == nil && a.GetManagedFields() != nil {
		a.SetManagedFields(nil)
	}
	return obj, nil
}

// itemIDs returns the IDs of the values that obj contributes to: its
// cache key ("namespace/name" or "name"), or for endpoint slices the
// service's.
func (rs *resState) itemIDs(obj any) []string {
	if rs.merged {
		if id, ok := sliceService(obj); ok {
			return []string{id}
		}
		return nil
	}
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		return nil
	}
	return []string{key}
}

// allItemIDs lists the IDs of every value the cache holds.
func (rs *resState) allItemIDs() []string {
	idx := rs.cache.Indexer
	if rs.merged {
		return idx.ListIndexFuncValues(serviceIndex)
	}
	return idx.ListKeys()
}

// desired computes the value of item id from the cache: its key relative to
// the prefix, the encoded value (nil when nothing is to be stored) and what
// made objects unusable. Called by the writer only.
func (rs *resState) desired(id string) (key string, value []byte, bad error) {
	ns, name, err := cache.SplitMetaNamespaceKey(id)
	if err != nil {
		return "", nil, err
	}
	idx := rs.cache.Indexer
	var msg proto.Message
	if rs.merged {
		key = kubemodel.EndpointsKey(ns, name)
		objs, err := idx.ByIndex(serviceIndex, id)
		if err != nil {
			return key, nil, err
		}
		sl := make([]*discoveryv1.EndpointSlice, 0, len(objs))
		for _, o := range objs {
			if s, ok := o.(*discoveryv1.EndpointSlice); ok {
				sl = append(sl, s)
			}
		}
		if len(sl) == 0 {
			return key, nil, nil
		}
		ep, err := ConvertEndpointSlices(ns, name, sl)
		bad = err
		if ep == nil {
			return key, nil, bad
		}
		msg = ep
	} else {
		key = rs.Key(ns, name)
		if rs.nodePrefix != "" {
			// Stored under the node's key: until the object says which,
			// the key it was stored under (if any).
			key = rs.keys[id]
		}
		obj, exists, err := idx.GetByKey(id)
		if err != nil || !exists {
			return key, nil, err
		}
		objKey := rs.Key(ns, name)
		if !strings.HasPrefix(objKey, rs.KeyPrefix) || len(objKey) == len(rs.KeyPrefix) {
			return key, nil, &ObjectError{Resource: rs.Name, Object: id, Reason: fmt.Sprintf("key %q is not under the resource's key prefix %q", objKey, rs.KeyPrefix)}
		}
		if rs.nodePrefix != "" {
			node := rs.Node(obj)
			if node == "" {
				return key, nil, nil // not on a node (yet): left out
			}
			key = rs.NodeKeyPrefix + node + "/" + objKey[len(rs.KeyPrefix):]
		}
		m, err := rs.Convert(obj)
		if err != nil || m == nil {
			return key, nil, err
		}
		msg = m
	}
	b, err := marshalOpts.Marshal(msg)
	if err != nil {
		return key, nil, errors.Join(bad, &ObjectError{Resource: rs.Name, Object: id, Reason: "cannot encode: " + err.Error()})
	}
	return key, b, bad
}

// noteBad records the outcome of a conversion of item id for Stats and
// logs a problem when it is new or changed.
func (r *Reflector) noteBad(rs *resState, id string, bad error) {
	if bad == nil {
		if _, ok := rs.badSet[id]; ok {
			delete(rs.badSet, id)
			rs.bad.Store(int64(len(rs.badSet)))
		}
		return
	}
	reason := bad.Error()
	if rs.badSet[id] == reason {
		return
	}
	rs.badSet[id] = reason
	rs.bad.Store(int64(len(rs.badSet)))
	rs.badReports.Add(1)
	r.log.Warn("object cannot be reflected; skipped", slog.String("resource", rs.Name), slog.String("object", id), slog.Any("error", bad))
}

// fullKey is the etcd key of a key relative to the Kubernetes-state
// prefix: prefix + relative key (e.g. "/vswitchkit/" + kubemodel.PodKey).
// It is the one place where keys are composed.
// op is one write: a put (value non-nil) or a delete of a relative key.
type op struct {
	rs    *resState
	key   string
	value []byte
}

// flush writes the dirty items, comparing each with what this leader knows
// to be in etcd.
func (r *Reflector) flush(ctx context.Context, fence clientv3.Cmp, dirty [][]string) error {
	var ops []op
	for i, ids := range dirty {
		rs := r.res[i]
		for _, id := range ids {
			key, val, bad := rs.desired(id)
			r.noteBad(rs, id, bad)
			if rs.nodePrefix != "" {
				// The object's node changed (deleted and made again on
				// another node): its old key goes.
				if old := rs.keys[id]; old != "" && old != key {
					if _, ok := rs.written[old]; ok {
						ops = append(ops, op{rs: rs, key: old})
					}
				}
				if val != nil {
					rs.keys[id] = key
				} else {
					delete(rs.keys, id)
				}
			}
			cur, ok := rs.written[key]
			switch {
			case val == nil && ok:
				ops = append(ops, op{rs: rs, key: key})
			case val != nil && (!ok || !bytes.Equal(cur, val)):
				ops = append(ops, op{rs: rs, key: key, value: val})
			}
		}
	}
	return r.commit(ctx, fence, ops)
}

// reconcile makes the keys of the resources in which (all when nil) in
// etcd equal to the caches: it reads the keys, puts what is missing or
// different and deletes keys that no object maps to. It never deletes the
// key of an object that exists, so a watcher sees only real changes.
func (r *Reflector) reconcile(ctx context.Context, fence clientv3.Cmp, which []bool) error {
	start := time.Now()
	// Drop the pending work first: the caches are read after this point,
	// so the reconcile covers it; later changes are marked again.
	r.dropDirty(which)
	var ops, leftovers []op
	perNode := false
	for i, rs := range r.res {
		if which != nil && !which[i] {
			continue
		}
		actual, err := r.readPrefix(ctx, rs.prefix)
		if err != nil {
			return err
		}
		if rs.nodePrefix != "" {
			perNode = true
			// The keys under the key prefix (the flat layout's) are all
			// leftovers; the values live under the node key prefix.
			stored, err := r.readPrefix(ctx, rs.nodePrefix)
			if err != nil {
				return err
			}
			maps.Copy(actual, stored)
			rs.keys = map[string]string{}
		}
		rs.written = actual
		rs.objects.Store(int64(len(actual)))
		if rs.badSet == nil {
			rs.badSet = map[string]string{}
		}
		want := make(map[string]struct{}, len(actual))
		for _, id := range rs.allItemIDs() {
			key, val, bad := rs.desired(id)
			r.noteBad(rs, id, bad)
			if val == nil {
				continue
			}
			want[key] = struct{}{}
			if rs.nodePrefix != "" {
				rs.keys[id] = key
			}
			if cur, ok := actual[key]; !ok || !bytes.Equal(cur, val) {
				ops = append(ops, op{rs: rs, key: key, value: val})
			}
		}
		for key := range actual {
			if _, ok := want[key]; !ok {
				if rs.nodePrefix != "" && strings.HasPrefix(key, rs.KeyPrefix) {
					leftovers = append(leftovers, op{rs: rs, key: key})
				} else {
					ops = append(ops, op{rs: rs, key: key})
				}
			}
		}
	}
	// The order moves the state from the flat layout without an agent
	// seeing its pods go: the per-node keys first, then the layout key
	// (agents read the new layout from then on), then the flat keys,
	// which agents of the new layout ignore.
	if err := r.commit(ctx, fence, ops); err != nil {
		return err
	}
	if perNode {
		if err := r.ensureLayout(ctx, fence); err != nil {
			return err
		}
	}
	if err := r.commit(ctx, fence, leftovers); err != nil {
		return err
	}
	ops = append(ops, leftovers...)
	d := time.Since(start)
	r.reconciles.Add(1)
	r.lastReconcile.Store(int64(d))
	r.log.Info("reconciled", slog.Int("writes", len(ops)), slog.Duration("duration", d))
	return nil
}

// ensureLayout writes kubemodel.CurrentLayout into kubemodel.LayoutKey
// unless it is there already: the per-node layout of the resources with a
// NodeKeyPrefix.
func (r *Reflector) ensureLayout(ctx context.Context, fence clientv3.Cmp) error {
	key := kubemodel.EtcdKey(r.cfg.Prefix, kubemodel.LayoutKey)
	want := kubemodel.FormatLayout(kubemodel.CurrentLayout)
	gctx, cancel := context.WithTimeout(ctx, r.cfg.WriteTimeout)
	defer cancel()
	resp, err := r.client.Get(gctx, key)
	if err != nil {
		return fmt.Errorf("read the layout key: %w", err)
	}
	if len(resp.Kvs) == 1 && bytes.Equal(resp.Kvs[0].Value, want) {
		return nil
	}
	tresp, err := r.client.Txn(gctx).If(fence).Then(clientv3.OpPut(key, string(want))).Commit()
	if err != nil {
		return fmt.Errorf("write the layout key: %w", err)
	}
	if !tresp.Succeeded {
		return errLostLeadership
	}
	r.log.Info("wrote the key layout", slog.String("key", key), slog.Int("layout", kubemodel.CurrentLayout))
	return nil
}

// readPrefix reads every key under prefix at one revision, page by page,
// keyed relative to Config.Prefix.
func (r *Reflector) readPrefix(ctx context.Context, prefix string) (map[string][]byte, error) {
	out := map[string][]byte{}
	end := clientv3.GetPrefixRangeEnd(prefix)
	from := prefix
	var rev int64
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(readPageSize)}
		if rev != 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		gctx, cancel := context.WithTimeout(ctx, r.cfg.WriteTimeout)
		resp, err := r.client.Get(gctx, from, opts...)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", prefix, err)
		}
		if rev == 0 {
			rev = resp.Header.Revision
		}
		for _, kv := range resp.Kvs {
			out[string(kv.Key[len(r.cfg.Prefix):])] = kv.Value
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return out, nil
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

// commit writes ops in fenced transactions of at most BatchSize operations
// and maxTxnBytes of values, up to maxInflight of them at once (etcd
// batches concurrent proposals; the keys of one commit are distinct, so
// their order does not matter), and records what was written. It returns
// errLostLeadership when the fence refused a transaction, else the first
// error; the transactions that succeeded are recorded either way.
func (r *Reflector) commit(ctx context.Context, fence clientv3.Cmp, ops []op) error {
	var batches [][]op
	for len(ops) > 0 {
		n, size := 0, 0
		for n < len(ops) && n < r.cfg.BatchSize && (n == 0 || size+len(ops[n].value) <= maxTxnBytes) {
			size += len(ops[n].value)
			n++
		}
		batches = append(batches, ops[:n])
		ops = ops[n:]
	}
	errs := make([]error, len(batches))
	if len(batches) == 1 {
		errs[0] = r.txn(ctx, fence, batches[0])
	} else {
		var (
			wg     sync.WaitGroup
			failed atomic.Bool
			sem    = make(chan struct{}, maxInflight)
		)
		for i, b := range batches {
			sem <- struct{}{}
			if failed.Load() {
				<-sem
				errs[i] = errSkipped
				continue
			}
			wg.Go(func() {
				defer func() { <-sem }()
				if errs[i] = r.txn(ctx, fence, b); errs[i] != nil {
					failed.Store(true)
				}
			})
		}
		wg.Wait()
	}
	var first error
	for i, b := range batches {
		if err := errs[i]; err != nil {
			if first == nil || errors.Is(err, errLostLeadership) {
				first = err
			}
			continue
		}
		r.txns.Add(1)
		for _, o := range b {
			if o.value == nil {
				delete(o.rs.written, o.key)
				o.rs.deletes.Add(1)
			} else {
				o.rs.written[o.key] = o.value
				o.rs.puts.Add(1)
			}
			o.rs.objects.Store(int64(len(o.rs.written)))
		}
		if r.hookCommitted != nil {
			r.hookCommitted(b)
		}
	}
	if errors.Is(first, errSkipped) {
		// Unreachable: a batch is skipped only after another failed.
		first = errors.New("reflector: write skipped")
	}
	return first
}

// errSkipped marks a batch not sent because another one failed.
var errSkipped = errors.New("skipped after an earlier failure")

// txn commits one fenced transaction.
func (r *Reflector) txn(ctx context.Context, fence clientv3.Cmp, batch []op) error {
	etcdOps := make([]clientv3.Op, len(batch))
	for i, o := range batch {
		if o.value == nil {
			etcdOps[i] = clientv3.OpDelete(kubemodel.EtcdKey(r.cfg.Prefix, o.key))
		} else {
			etcdOps[i] = clientv3.OpPut(kubemodel.EtcdKey(r.cfg.Prefix, o.key), string(o.value))
		}
	}
	tctx, cancel := context.WithTimeout(ctx, r.cfg.WriteTimeout)
	resp, err := r.client.Txn(tctx).If(fence).Then(etcdOps...).Commit()
	cancel()
	if err != nil {
		return fmt.Errorf("write %d keys: %w", len(batch), err)
	}
	if !resp.Succeeded {
		return errLostLeadership
	}
	r.log.Debug("committed", slog.Int("ops", len(batch)), slog.Int64("revision", resp.Header.Revision))
	return nil
}
