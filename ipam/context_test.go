package ipam_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/controllertest"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/ipam"
	"github.com/vswitchkit/vswitchkit/ipam/ipamtest"
)

// ctxTxn is a transaction that carries an event's context, as the loop's
// do (see controller.ContextOf).
type ctxTxn struct {
	*controllertest.Txn
	ctx context.Context
}

func (t ctxTxn) Context() context.Context { return t.ctx }

type eventKey struct{}

// ctxStore records, per Store call, the eventKey value of its context.
type ctxStore struct {
	ipam.Store
	mu   sync.Mutex
	seen []string
}

func (s *ctxStore) note(ctx context.Context, call string) {
	v, _ := ctx.Value(eventKey{}).(string)
	s.mu.Lock()
	s.seen = append(s.seen, call+" "+v)
	s.mu.Unlock()
}

func (s *ctxStore) PutAllocation(ctx context.Context, a ipam.Allocation) error {
	s.note(ctx, "put")
	return s.Store.PutAllocation(ctx, a)
}

func (s *ctxStore) DeleteAllocation(ctx context.Context, pod kubemodel.PodID) error {
	s.note(ctx, "delete")
	return s.Store.DeleteAllocation(ctx, pod)
}

func (s *ctxStore) ListAllocations(ctx context.Context) ([]ipam.Allocation, error) {
	s.note(ctx, "list")
	return s.Store.ListAllocations(ctx)
}

func (s *ctxStore) calls() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.seen
	s.seen = nil
	return out
}

// TestStoreCallsUseTheEventContext: the Store calls of Resync and Update
// get the event's context (CONTRIBUTING R6), so the loop's shutdown
// deadline reaches them; the direct API, which takes no context, and
// Revert, which gets no transaction, bound theirs by StoreTimeout only.
func TestStoreCallsUseTheEventContext(t *testing.T) {
	inner := &ipamtest.MemStore{}
	require.NoError(t, inner.PutAllocation(t.Context(), ipam.Allocation{Pod: pod("elsewhere"), Addr: addr("10.1.6.9")}))
	store := &ctxStore{Store: inner}
	i := must(ipam.New(ipamtest.NewNodeID(5), ipam.Config{Store: store}))
	txn := func(name string) controller.UpdateOperations {
		return ctxTxn{controllertest.NewTxn(), context.WithValue(context.Background(), eventKey{}, name)}
	}

	require.NoError(t, i.Resync(controller.NewDBResync(), kubeState([]*kubemodel.Pod{kpod("k", "10.1.5.20")}), 1, txn("resync")))
	assert.Equal(t, []string{"list resync", "put resync", "delete resync"}, store.calls(),
		"the pod from the Kubernetes state is written and the record outside the subnet deleted under the resync's context")

	add := controller.NewAddPodEvent(pod("web"), "c1", "/netns")
	_, err := i.Update(add, txn("add"))
	require.NoError(t, err)
	_, err = i.Update(controller.NewDeletePodEvent(pod("k"), ""), txn("del"))
	require.NoError(t, err)
	assert.Equal(t, []string{"put add", "delete del"}, store.calls())

	require.NoError(t, i.Revert(add))
	_, err = i.AllocatePodIP(pod("direct"), "", "")
	require.NoError(t, err)
	require.NoError(t, i.ReleasePodIP(pod("direct")))
	assert.Equal(t, []string{"delete ", "put ", "delete "}, store.calls())

	// A cancelled event fails its Store call and keeps the address
	// reserved, as any failed write does.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = i.Update(controller.NewAddPodEvent(pod("late"), "c2", "/netns"), ctxTxn{controllertest.NewTxn(), ctx})
	require.ErrorIs(t, err, context.Canceled)
	assert.NotNil(t, i.GetPodIP(pod("late")))
}
