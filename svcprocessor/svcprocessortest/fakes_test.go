package svcprocessortest_test

import (
	"errors"
	"net/netip"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/svcprocessor"
	"github.com/vswitchkit/vswitchkit/svcprocessor/svcprocessortest"
)

func TestFakes(t *testing.T) {
	p1, p2 := netip.MustParsePrefix("10.1.1.0/24"), netip.MustParsePrefix("10.1.0.0/16")
	var s svcprocessortest.Subnets
	assert.False(t, s.PodSubnetThisNode().IsValid())
	s.Set(p1, p2)
	assert.Equal(t, p1, s.PodSubnetThisNode())
	assert.Equal(t, p2, s.PodSubnetAllNodes())

	a := netip.MustParseAddr("192.168.16.1")
	n := svcprocessortest.NewNodeIPs(a)
	got := n.NodeIPs()
	got[0] = netip.Addr{}
	assert.Equal(t, []netip.Addr{a}, n.NodeIPs(), "NodeIPs returns a copy")

	var pods svcprocessortest.Pods
	id := kubemodel.PodID{Namespace: "ns", Name: "p"}
	_, ok := pods.PodInterface(id)
	assert.False(t, ok)
	pods.Connect(id, "tap0")
	name, ok := pods.PodInterface(id)
	assert.True(t, ok)
	assert.Equal(t, "tap0", name)
	pods.Disconnect(id)
	_, ok = pods.PodInterface(id)
	assert.False(t, ok)

	// Safe for concurrent use.
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			pods.Connect(kubemodel.PodID{Namespace: "ns", Name: string(rune('a' + i))}, "tap")
			n.Set(a)
			_ = n.NodeIPs()
			s.Set(p1, p2)
			_ = s.PodSubnetThisNode()
		})
	}
	wg.Wait()
}

func TestRecorder(t *testing.T) {
	boom := errors.New("boom")
	rec := &svcprocessortest.Recorder{Fail: func(ev svcprocessor.RenderEvent) error {
		if ev.Kind == svcprocessor.ServiceDeleted {
			return boom
		}
		return nil
	}}
	s1 := &svcprocessor.ContivService{ID: kubemodel.ServiceID{Namespace: "b", Name: "x"}}
	s2 := &svcprocessor.ContivService{ID: kubemodel.ServiceID{Namespace: "a", Name: "y"}}
	require.NoError(t, rec.Render(svcprocessor.RenderEvent{Kind: svcprocessor.ServiceAdded, NewService: s1}))
	require.NoError(t, rec.Render(svcprocessor.RenderEvent{Kind: svcprocessor.ServiceAdded, NewService: s2}))
	require.NoError(t, rec.Render(svcprocessor.RenderEvent{Kind: svcprocessor.BackendsChanged, NewInterfaces: []string{"tap1"}}))
	require.ErrorIs(t, rec.Render(svcprocessor.RenderEvent{Kind: svcprocessor.ServiceDeleted, OldService: s1}), boom)

	assert.Len(t, rec.Failed(), 1)
	assert.Equal(t, []svcprocessor.RenderKind{svcprocessor.ServiceAdded, svcprocessor.ServiceAdded, svcprocessor.BackendsChanged}, rec.Kinds())
	st := rec.State()
	assert.Equal(t, []*svcprocessor.ContivService{s2, s1}, st.Services, "sorted by ID; failed delete not applied")
	assert.Equal(t, []string{"tap1"}, st.Backends)
	assert.Same(t, s1, rec.Service(s1.ID))
	assert.Empty(t, rec.Inconsistencies())

	rec.ClearEvents()
	assert.Nil(t, rec.Kinds())
	assert.Len(t, rec.State().Services, 2)

	require.NoError(t, rec.Render(svcprocessor.RenderEvent{Kind: svcprocessor.Resync, Snapshot: &svcprocessor.Snapshot{Services: []*svcprocessor.ContivService{s1}}}))
	assert.Equal(t, []*svcprocessor.ContivService{s1}, rec.State().Services)

	rec.Reset()
	assert.Empty(t, rec.State().Services)
	assert.Empty(t, rec.Events())
}
