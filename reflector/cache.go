package reflector

import (
	"sync/atomic"

	"k8s.io/client-go/tools/cache"
)

// store is the cache of one resource's objects (and of the resources that
// share it: Resource.SharedWith), which client-go's reflector lists and
// watches into directly (no DeltaFIFO, no shared informer: the reflector
// only needs the current objects and which of them changed). Every change
// marks the items it touches dirty for the writer; a full list (Replace)
// after the first marks the resources for a reconcile. It exists so that
// the client-go reflector's backoff can be set (Config.APIRetryMaxBackoff):
// client-go's shared informers fix it at 0.8 s doubling to 30 s.
//
// The client-go reflector calls it from its one goroutine; the writer
// reads the Indexer, which is safe for concurrent use.
type store struct {
	cache.Indexer
	r      *Reflector
	feeds  []*resState // the resource that owns the cache, then those that share it
	synced atomic.Bool // the first full list is in
}

func newStore(r *Reflector, rs *resState) *store {
	var indexers cache.Indexers
	if rs.merged {
		indexers = cache.Indexers{serviceIndex: sliceServiceIndex}
	}
	return &store{Indexer: cache.NewIndexer(cache.DeletionHandlingMetaNamespaceKeyFunc, indexers), r: r, feeds: []*resState{rs}}
}

// Transformer is applied to the objects of a watch-list before Replace
// (cache.TransformingStore). Managed fields are the largest part of most
// objects and never reflected; dropping them keeps the cache small.
func (s *store) Transformer() cache.TransformFunc { return stripManagedFields }

// Add implements cache.ReflectorStore.
func (s *store) Add(obj any) error {
	obj, _ = stripManagedFields(obj)
	if err := s.Indexer.Add(obj); err != nil {
		return err
	}
	s.changed(nil, obj)
	return nil
}

// Update implements cache.ReflectorStore.
func (s *store) Update(obj any) error {
	obj, _ = stripManagedFields(obj)
	old, _, _ := s.Indexer.Get(obj)
	if err := s.Indexer.Update(obj); err != nil {
		return err
	}
	s.changed(old, obj)
	return nil
}

// Delete implements cache.ReflectorStore.
func (s *store) Delete(obj any) error {
	old, _, _ := s.Indexer.Get(obj)
	if err := s.Indexer.Delete(obj); err != nil {
		return err
	}
	s.changed(old, obj)
	return nil
}

// Replace implements cache.ReflectorStore: a full list. The first one
// syncs the cache; each later one (a re-list: the watch expired, or the
// API server restarted) marks the resources for a reconcile, which
// compares all of etcd with the cache.
func (s *store) Replace(list []any, rv string) error {
	for i := range list {
		list[i], _ = stripManagedFields(list[i])
	}
	if err := s.Indexer.Replace(list, rv); err != nil {
		return err
	}
	relist := s.synced.Swap(true)
	s.r.mu.Lock()
	for _, rs := range s.feeds {
		rs.events.Add(uint64(len(list)))
		rs.lists.Add(1)
		if relist {
			s.r.relist[rs.idx] = true
		}
	}
	s.r.mu.Unlock()
	if relist {
		s.r.signal()
	}
	return nil
}

// Resync implements cache.ReflectorStore; there is nothing to resync.
func (s *store) Resync() error { return nil }

// changed marks the items of obj (and, for endpoint slices, of the slice's
// old service) dirty in every resource the cache feeds.
func (s *store) changed(old, obj any) {
	for _, rs := range s.feeds {
		rs.events.Add(1)
		ids := rs.itemIDs(obj)
		if rs.merged && old != nil { // a slice may move to another service
			for _, id := range rs.itemIDs(old) {
				if len(ids) == 0 || id != ids[0] {
					ids = append(ids, id)
				}
			}
		}
		s.r.markDirty(rs, ids...)
	}
}
