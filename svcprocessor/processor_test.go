package svcprocessor_test

import (
	"errors"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/controllertest"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/svcprocessor"
	"github.com/vswitchkit/vswitchkit/svcprocessor/svcprocessortest"
)

func TestNewValidates(t *testing.T) {
	_, err := svcprocessor.New(nil, nil, nil, svcprocessor.Config{FrontendInterfaces: []string{""}})
	require.Error(t, err)
	for _, want := range []string{"PodSubnets", "NodeIPs", "PodInterfaces", "FrontendInterfaces[0]"} {
		assert.ErrorContains(t, err, want)
	}
	sp, err := svcprocessor.New(svcprocessortest.NewSubnets(netip.Prefix{}, netip.Prefix{}), &svcprocessortest.NodeIPs{}, &svcprocessortest.Pods{}, svcprocessor.Config{})
	require.NoError(t, err)
	require.NoError(t, sp.Resync(controller.NewKubeStateData()))
	assert.Empty(t, sp.Snapshot().Services)
}

func TestNodePortWithNodeIPsOfEveryNode(t *testing.T) {
	f := newFixture(t, svcprocessor.Config{})
	np := mkService("ns", "np", func(s *kubemodel.Service) {
		s.Type = kubemodel.Service_NODE_PORT
		s.Ports[0].NodePort = 30080
	})
	plain := mkService("ns", "plain", nil)
	require.NoError(t, f.sp.Resync(kubeState([]*kubemodel.Service{np, plain}, nil, nil)))
	snap := f.rec.State()
	assert.Equal(t, []netip.Addr{node1IP, node2IP}, snap.NodeIPs)

	// A third node joins: renderers learn the new set and find the NodePort
	// services through the view.
	var seenNodePort []kubemodel.ServiceID
	seen := svcprocessor.RendererFunc(func(ev svcprocessor.RenderEvent) error {
		if ev.Kind == svcprocessor.NodeIPsChanged {
			for s := range ev.Services.NodePortServices() {
				seenNodePort = append(seenNodePort, s.ID)
			}
		}
		return nil
	})
	require.NoError(t, f.sp.RegisterRenderer(seen))
	f.nodes.Set(node3IP, node1IP, node2IP, node1IP) // unsorted, duplicate
	f.rec.ClearEvents()
	require.NoError(t, f.sp.Update(&fakeNodeUpdate{}))
	evs := f.rec.Events()
	require.Len(t, evs, 1)
	assert.Equal(t, svcprocessor.NodeIPsChanged, evs[0].Kind)
	assert.Equal(t, []netip.Addr{node1IP, node2IP}, evs[0].OldNodeIPs)
	assert.Equal(t, []netip.Addr{node1IP, node2IP, node3IP}, evs[0].NewNodeIPs)
	assert.Equal(t, []kubemodel.ServiceID{sid("ns", "np")}, seenNodePort)

	// Same IPs again: no notification.
	f.rec.ClearEvents()
	require.NoError(t, f.sp.Update(&fakeNodeUpdate{}))
	assert.Empty(t, f.rec.Events())

	// The NodePort service loses its node port: it leaves the index.
	require.NoError(t, f.sp.Update(svcChange(np, mkService("ns", "np", nil))))
	seenNodePort = nil
	f.nodes.Set(node1IP)
	require.NoError(t, f.sp.Update(&fakeNodeUpdate{}))
	assert.Empty(t, seenNodePort)
}

// fakeNodeUpdate stands for the node sync NodeUpdate event.
type fakeNodeUpdate struct{}

func (*fakeNodeUpdate) GetName() string                    { return svcprocessor.NodeUpdateEventName }
func (*fakeNodeUpdate) String() string                     { return "Node Update" }
func (*fakeNodeUpdate) Method() controller.EventMethodType { return controller.Update }
func (*fakeNodeUpdate) IsBlocking() bool                   { return false }
func (*fakeNodeUpdate) Done(error)                         {}
func (*fakeNodeUpdate) TransactionType() controller.UpdateTransactionType {
	return controller.BestEffort
}
func (*fakeNodeUpdate) Direction() controller.UpdateDirectionType { return controller.Forward }

func TestServiceAndEndpointsOrder(t *testing.T) {
	svc := mkService("ns", "s", nil)
	eps := mkEndpoints("ns", "s", httpSubset(mkAddr("10.1.1.5", "web", thisNode)))
	type step struct {
		ev        controller.Event
		wantKinds []svcprocessor.RenderKind
	}
	add, upd, del := svcprocessor.ServiceAdded, svcprocessor.ServiceUpdated, svcprocessor.ServiceDeleted
	back, front := svcprocessor.BackendsChanged, svcprocessor.FrontendsChanged
	tests := []struct {
		name  string
		steps []step
	}{
		{"service, endpoints, delete service, delete endpoints", []step{
			{svcChange(nil, svc), []svcprocessor.RenderKind{add}},
			{epsChange(nil, eps), []svcprocessor.RenderKind{upd, back, front}},
			{svcChange(svc, nil), []svcprocessor.RenderKind{del, front, back}},
			{epsChange(eps, nil), nil},
		}},
		{"service, endpoints, delete endpoints, delete service", []step{
			{svcChange(nil, svc), []svcprocessor.RenderKind{add}},
			{epsChange(nil, eps), []svcprocessor.RenderKind{upd, back, front}},
			{epsChange(eps, nil), []svcprocessor.RenderKind{upd, front, back}},
			{svcChange(svc, nil), []svcprocessor.RenderKind{del}},
		}},
		{"endpoints first, delete service first", []step{
			{epsChange(nil, eps), nil},
			{svcChange(nil, svc), []svcprocessor.RenderKind{add, back, front}},
			{svcChange(svc, nil), []svcprocessor.RenderKind{del, front, back}},
			{epsChange(eps, nil), nil},
		}},
		{"endpoints first, delete endpoints first", []step{
			{epsChange(nil, eps), nil},
			{svcChange(nil, svc), []svcprocessor.RenderKind{add, back, front}},
			{epsChange(eps, nil), []svcprocessor.RenderKind{upd, front, back}},
			{svcChange(svc, nil), []svcprocessor.RenderKind{del}},
		}},
		{"unchanged endpoints give no notification", []step{
			{svcChange(nil, svc), []svcprocessor.RenderKind{add}},
			{epsChange(nil, eps), []svcprocessor.RenderKind{upd, back, front}},
			{epsChange(eps, mkEndpoints("ns", "s", httpSubset(mkAddr("10.1.1.5", "web", thisNode)))), nil},
		}},
		{"annotations are part of the view, labels are not", []step{
			{svcChange(nil, svc), []svcprocessor.RenderKind{add}},
			{svcChange(svc, annotated(svc, "vswitchkit.io/lb", "maglev")), []svcprocessor.RenderKind{upd}},
			{svcChange(annotated(svc, "vswitchkit.io/lb", "maglev"), labeled(annotated(svc, "vswitchkit.io/lb", "maglev"))), nil},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, svcprocessor.Config{})
			f.pods.Connect(pid("ns", "web"), "tap-web")
			require.NoError(t, f.sp.Resync(controller.NewKubeStateData()))
			require.NoError(t, f.sp.ProcessNewPod("ns", "web"))
			for i, st := range tc.steps {
				f.rec.ClearEvents()
				require.NoError(t, f.sp.Update(st.ev), "step %d", i)
				assert.Equal(t, st.wantKinds, f.rec.Kinds(), "step %d: %s", i, st.ev)
			}
			snap := f.sp.Snapshot()
			assert.Equal(t, normSnap(snap), normSnap(f.rec.State()))
			if tc.name == "unchanged endpoints give no notification" {
				return
			}
			if tc.name == "annotations are part of the view, labels are not" {
				assert.Equal(t, map[string]string{"vswitchkit.io/lb": "maglev"}, f.sp.Service(sid("ns", "s")).Annotations)
				return
			}
			// Everything deleted: the pod is a plain frontend again, no service left.
			assert.Nil(t, f.sp.Service(sid("ns", "s")))
			assert.Empty(t, snap.Services)
			assert.Equal(t, []string{"tap-web"}, snap.Frontends)
			assert.Empty(t, snap.Backends)
		})
	}
}

func TestPodInterfaces(t *testing.T) {
	web, other := pid("ns", "web"), pid("ns", "other")
	svc := mkService("ns", "s", nil)
	eps := mkEndpoints("ns", "s", httpSubset(mkAddr("10.1.1.5", "web", thisNode), mkAddr("10.1.2.5", "remote", "node2")))
	tests := []struct {
		name                string
		run                 func(t *testing.T, f *fixture)
		wantFront, wantBack []string
	}{
		{"pod added before it becomes a backend", func(t *testing.T, f *fixture) {
			require.NoError(t, f.sp.ProcessNewPod("ns", "web"))
			require.NoError(t, f.sp.Update(svcChange(nil, svc)))
			require.NoError(t, f.sp.Update(epsChange(nil, eps)))
		}, []string{"eth0", "tap-other"}, []string{"tap-web"}},
		{"pod becomes a backend before its AddPod", func(t *testing.T, f *fixture) {
			require.NoError(t, f.sp.Update(svcChange(nil, svc)))
			require.NoError(t, f.sp.Update(epsChange(nil, eps)))
			ep, ok := f.sp.LocalEndpoint(web)
			require.True(t, ok)
			assert.Equal(t, 1, ep.ServiceCount())
			assert.Empty(t, ep.IfName())
			require.NoError(t, f.sp.Update(controller.NewAddPodEvent(web, "c1", "/proc/1/ns/net")))
		}, []string{"eth0", "tap-other"}, []string{"tap-web"}},
		{"deleted backend pod leaves the sets", func(t *testing.T, f *fixture) {
			require.NoError(t, f.sp.ProcessNewPod("ns", "web"))
			require.NoError(t, f.sp.Update(svcChange(nil, svc)))
			require.NoError(t, f.sp.Update(epsChange(nil, eps)))
			require.NoError(t, f.sp.Update(controller.NewDeletePodEvent(web, "c1")))
			ep, ok := f.sp.LocalEndpoint(web)
			require.True(t, ok, "still a backend of one service")
			assert.Empty(t, ep.IfName())
		}, []string{"eth0", "tap-other"}, nil},
		{"failed AddPod is reverted", func(t *testing.T, f *fixture) {
			ev := controller.NewAddPodEvent(web, "c1", "/proc/1/ns/net")
			require.NoError(t, f.sp.Update(ev))
			require.NoError(t, f.sp.Revert(ev))
			_, ok := f.sp.LocalEndpoint(web)
			assert.False(t, ok)
		}, []string{"eth0", "tap-other"}, nil},
		{"a replaced sandbox's late DeletePod keeps the pod connected", func(t *testing.T, f *fixture) {
			require.NoError(t, f.sp.Update(controller.NewAddPodEvent(web, "c1", "/proc/1/ns/net")))
			require.NoError(t, f.sp.Update(controller.NewAddPodEvent(web, "c2", "/proc/2/ns/net"))) // new sandbox
			require.NoError(t, f.sp.Update(controller.NewDeletePodEvent(web, "c1")))                // the old one's DEL
			ep, ok := f.sp.LocalEndpoint(web)
			require.True(t, ok)
			assert.Equal(t, "tap-web", ep.IfName())
		}, []string{"eth0", "tap-other", "tap-web"}, nil},
		{"the holder's DeletePod disconnects", func(t *testing.T, f *fixture) {
			require.NoError(t, f.sp.Update(controller.NewAddPodEvent(web, "c1", "/proc/1/ns/net")))
			require.NoError(t, f.sp.Update(controller.NewAddPodEvent(web, "c2", "/proc/2/ns/net")))
			require.NoError(t, f.sp.Update(controller.NewDeletePodEvent(web, "c2")))
			_, ok := f.sp.LocalEndpoint(web)
			assert.False(t, ok)
		}, []string{"eth0", "tap-other"}, nil},
		{"a DeletePod without sandbox disconnects", func(t *testing.T, f *fixture) {
			require.NoError(t, f.sp.Update(controller.NewAddPodEvent(web, "c1", "/proc/1/ns/net")))
			require.NoError(t, f.sp.Update(controller.NewDeletePodEvent(web, "")))
			_, ok := f.sp.LocalEndpoint(web)
			assert.False(t, ok)
		}, []string{"eth0", "tap-other"}, nil},
		{"a failed AddPod of a new sandbox keeps the old one connected", func(t *testing.T, f *fixture) {
			require.NoError(t, f.sp.Update(controller.NewAddPodEvent(web, "c1", "/proc/1/ns/net")))
			ev := controller.NewAddPodEvent(web, "c2", "/proc/2/ns/net")
			require.NoError(t, f.sp.Update(ev))
			require.NoError(t, f.sp.Revert(ev))
			require.NoError(t, f.sp.Update(controller.NewDeletePodEvent(web, "c2")), "c2 never held it")
			ep, ok := f.sp.LocalEndpoint(web)
			require.True(t, ok)
			assert.Equal(t, "tap-web", ep.IfName())
		}, []string{"eth0", "tap-other", "tap-web"}, nil},
		{"backend pod in two services counts twice", func(t *testing.T, f *fixture) {
			svc2 := mkService("ns", "s2", nil)
			eps2 := mkEndpoints("ns", "s2", httpSubset(mkAddr("10.1.1.5", "web", thisNode)))
			require.NoError(t, f.sp.ProcessNewPod("ns", "web"))
			for _, ev := range []controller.Event{svcChange(nil, svc), epsChange(nil, eps), svcChange(nil, svc2), epsChange(nil, eps2), epsChange(eps, nil)} {
				require.NoError(t, f.sp.Update(ev))
			}
			ep, _ := f.sp.LocalEndpoint(web)
			assert.Equal(t, 1, ep.ServiceCount())
		}, []string{"eth0", "tap-other"}, []string{"tap-web"}},
		{"resync keeps pods connected before", func(t *testing.T, f *fixture) {
			require.NoError(t, f.sp.ProcessNewPod("ns", "web"))
			require.NoError(t, f.sp.Resync(kubeState([]*kubemodel.Service{svc}, []*kubemodel.Endpoints{eps}, nil)))
		}, []string{"eth0", "tap-other"}, []string{"tap-web"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, svcprocessor.Config{FrontendInterfaces: []string{"eth0"}})
			f.pods.Connect(web, "tap-web")
			f.pods.Connect(other, "tap-other")
			require.NoError(t, f.sp.Resync(kubeState(nil, nil, []*kubemodel.Pod{{Namespace: "ns", Name: "other"}})))
			tc.run(t, f)
			snap := f.sp.Snapshot()
			assert.Equal(t, tc.wantFront, snap.Frontends)
			assert.Equal(t, tc.wantBack, nilIfEmpty(snap.Backends))
			// The recorder, fed only with notifications, agrees.
			assert.Equal(t, normSnap(snap), normSnap(f.rec.State()))
			assert.Empty(t, f.rec.Inconsistencies())
		})
	}
}

func nilIfEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}

func TestProcessNewPodUnknown(t *testing.T) {
	f := newFixture(t, svcprocessor.Config{})
	err := f.sp.ProcessNewPod("ns", "ghost")
	require.ErrorIs(t, err, svcprocessor.ErrPodNotConnected)
	assert.NoError(t, f.sp.ProcessDeletingPod("ns", "ghost"), "unknown pods are ignored on delete")
}

func TestRendererErrors(t *testing.T) {
	f := newFixture(t, svcprocessor.Config{})
	boom := errors.New("boom")
	failing := &svcprocessortest.Recorder{Fail: func(ev svcprocessor.RenderEvent) error {
		if ev.Kind == svcprocessor.ServiceUpdated {
			return boom
		}
		return nil
	}}
	require.NoError(t, f.sp.RegisterRenderer(failing))
	third := &svcprocessortest.Recorder{}
	require.NoError(t, f.sp.RegisterRenderer(third))
	require.NoError(t, f.sp.Resync(controller.NewKubeStateData()))

	svc := mkService("ns", "s", nil)
	require.NoError(t, f.sp.Update(svcChange(nil, svc)))
	eps := mkEndpoints("ns", "s", httpSubset(mkAddr("10.1.2.5", "", "")))
	err := f.sp.Update(epsChange(nil, eps))
	require.ErrorIs(t, err, boom)
	var rerr *svcprocessor.RendererError
	require.ErrorAs(t, err, &rerr)
	assert.Equal(t, 1, rerr.Index)
	assert.Equal(t, svcprocessor.ServiceUpdated, rerr.Kind)

	// The processor kept the change, and the other renderers got it.
	cur := f.sp.Service(sid("ns", "s"))
	require.NotNil(t, cur)
	require.Len(t, cur.Ports[0].Backends, 1)
	assert.Same(t, cur, f.rec.Service(sid("ns", "s")))
	assert.Same(t, cur, third.Service(sid("ns", "s")))
	assert.Len(t, failing.Failed(), 1)

	// A resync heals the failing renderer.
	require.NoError(t, f.sp.Resync(kubeState([]*kubemodel.Service{svc}, []*kubemodel.Endpoints{eps}, nil)))
	assert.True(t, cur.Equal(failing.Service(sid("ns", "s"))))
}

func TestBadInput(t *testing.T) {
	f := newFixture(t, svcprocessor.Config{})
	svc := mkService("ns", "s", nil)
	require.NoError(t, f.sp.Resync(kubeState([]*kubemodel.Service{svc}, nil, nil)))
	before := f.sp.Snapshot()

	tests := []struct {
		name string
		run  func() error
	}{
		{"pod value under service", func() error {
			return f.sp.Update(&controller.KubeStateChange{Resource: kubemodel.ServiceResource, Key: "k8s/service/ns/s", NewValue: &kubemodel.Pod{}})
		}},
		{"service value under endpoints", func() error {
			return f.sp.Update(&controller.KubeStateChange{Resource: kubemodel.EndpointsResource, Key: "k8s/endpoints/ns/s", NewValue: svc})
		}},
		{"delete with malformed key", func() error {
			return f.sp.Update(&controller.KubeStateChange{Resource: kubemodel.ServiceResource, Key: "k8s/service/NS"})
		}},
		{"service value names another service", func() error {
			return f.sp.Update(&controller.KubeStateChange{Resource: kubemodel.ServiceResource, Key: kubemodel.ServiceKey("ns", "s"),
				NewValue: mkService("other", "x", nil)})
		}},
		{"service value names another name", func() error {
			return f.sp.Update(&controller.KubeStateChange{Resource: kubemodel.ServiceResource, Key: kubemodel.ServiceKey("ns", "s"),
				NewValue: mkService("ns", "x", nil)})
		}},
		{"endpoints value names another service", func() error {
			return f.sp.Update(&controller.KubeStateChange{Resource: kubemodel.EndpointsResource, Key: kubemodel.EndpointsKey("ns", "s"),
				NewValue: mkEndpoints("other", "s", httpSubset(&kubemodel.EndpointAddress{Ip: "10.1.1.9"}))})
		}},
		{"value under a key outside the scheme", func() error {
			return f.sp.Update(&controller.KubeStateChange{Resource: kubemodel.ServiceResource, Key: "k8s/svc/ns/s",
				NewValue: mkService("ns", "s", nil)})
		}},
		{"resync with wrong type", func() error {
			ksd := kubeState(nil, nil, nil)
			ksd[kubemodel.ServiceResource]["k8s/service/ns/x"] = &kubemodel.Endpoints{Namespace: "ns", Name: "x"}
			return f.sp.Resync(ksd)
		}},
		{"resync with nameless service", func() error {
			ksd := kubeState(nil, nil, nil)
			ksd[kubemodel.ServiceResource]["k8s/service/ns/x"] = &kubemodel.Service{}
			return f.sp.Resync(ksd)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.run()
			require.ErrorIs(t, err, svcprocessor.ErrUnexpectedValue)
			assert.Equal(t, normSnap(before), normSnap(f.sp.Snapshot()), "state must be unchanged")
			if !strings.HasPrefix(tc.name, "resync") {
				// Bad input for one key: permanent, the event loop does not
				// heal it, and reports the key.
				assert.True(t, controller.IsPermanent(err), "permanent: %v", err)
				assert.Len(t, controller.KeyErrors(err), 1)
			}
		})
	}

	// Malformed IPs and ports inside a service are skipped, not fatal.
	bad := mkService("ns", "bad", func(s *kubemodel.Service) {
		s.ClusterIps = []string{"10.96.0.300", "10.96.0.11"}
		s.Ports = append(s.Ports, &kubemodel.ServicePort{Name: "neg", Port: -1}, &kubemodel.ServicePort{Name: "np", Port: 81, NodePort: 70000})
	})
	require.NoError(t, f.sp.Update(svcChange(nil, bad)))
	got := f.sp.Service(sid("ns", "bad"))
	require.NotNil(t, got)
	assert.Equal(t, []netip.Addr{netip.MustParseAddr("10.96.0.11")}, got.ClusterIPs)
	require.Len(t, got.Ports, 2)
	assert.False(t, got.HasNodePort())
}

// TestResyncSkipsMismatchedValues: a value whose namespace/name is not the
// one its key names is skipped (and reported), the rest of the resync is
// applied.
func TestResyncSkipsMismatchedValues(t *testing.T) {
	f := newFixture(t, svcprocessor.Config{})
	good := mkService("ns", "good", nil)
	goodEps := mkEndpoints("ns", "good", httpSubset(&kubemodel.EndpointAddress{Ip: "10.1.1.5"}))
	ksd := kubeState([]*kubemodel.Service{good}, []*kubemodel.Endpoints{goodEps}, nil)
	ksd[kubemodel.ServiceResource][kubemodel.ServiceKey("ns", "a")] = mkService("ns", "impostor", nil)
	ksd[kubemodel.EndpointsResource][kubemodel.EndpointsKey("ns", "b")] = mkEndpoints("other", "b")
	err := f.sp.Resync(ksd)
	require.ErrorIs(t, err, svcprocessor.ErrUnexpectedValue)
	assert.True(t, controller.IsPermanent(err), "permanent: %v", err)
	var keys []string
	for _, ke := range controller.KeyErrors(err) {
		keys = append(keys, ke.Key)
	}
	slices.Sort(keys)
	assert.Equal(t, []string{kubemodel.EndpointsKey("ns", "b"), kubemodel.ServiceKey("ns", "a")}, keys)

	var ids []kubemodel.ServiceID
	for _, s := range f.sp.Snapshot().Services {
		ids = append(ids, s.ID)
	}
	assert.Equal(t, []kubemodel.ServiceID{sid("ns", "good")}, ids, "the mismatched values created no service")
	require.NotNil(t, f.sp.Service(sid("ns", "good")))
	assert.Len(t, f.sp.Service(sid("ns", "good")).Ports[0].Backends, 1)
	assert.Equal(t, svcprocessor.Resync, f.rec.Kinds()[len(f.rec.Kinds())-1], "renderers got the snapshot")
}

func TestDeleteByKeyOnly(t *testing.T) {
	f := newFixture(t, svcprocessor.Config{})
	require.NoError(t, f.sp.Update(svcChange(nil, mkService("ns", "s", nil))))
	// A delete carrying only the key (with an application prefix in front).
	require.NoError(t, f.sp.Update(&controller.KubeStateChange{Resource: kubemodel.ServiceResource, Key: "/app/" + kubemodel.ServiceKey("ns", "s")}))
	assert.Nil(t, f.sp.Service(sid("ns", "s")))
	assert.Equal(t, []svcprocessor.RenderKind{svcprocessor.ServiceAdded, svcprocessor.ServiceDeleted}, f.rec.Kinds())
}

func TestRegisterRendererLate(t *testing.T) {
	f := newFixture(t, svcprocessor.Config{})
	require.ErrorIs(t, f.sp.RegisterRenderer(nil), svcprocessor.ErrNilRenderer)
	require.NoError(t, f.sp.Resync(kubeState([]*kubemodel.Service{mkService("ns", "s", nil)}, nil, nil)))
	late := &svcprocessortest.Recorder{}
	require.NoError(t, f.sp.RegisterRenderer(late))
	assert.Equal(t, []svcprocessor.RenderKind{svcprocessor.Resync}, late.Kinds())
	assert.Equal(t, normSnap(f.sp.Snapshot()), normSnap(late.State()))
}

func TestClose(t *testing.T) {
	f := newFixture(t, svcprocessor.Config{})
	require.NoError(t, f.sp.Close())
	require.NoError(t, f.sp.Close())
	assert.ErrorIs(t, f.sp.Resync(controller.NewKubeStateData()), svcprocessor.ErrClosed)
	assert.ErrorIs(t, f.sp.Update(svcChange(nil, mkService("ns", "s", nil))), svcprocessor.ErrClosed)
	assert.ErrorIs(t, f.sp.ProcessNewPod("ns", "p"), svcprocessor.ErrClosed)
	assert.ErrorIs(t, f.sp.ProcessDeletingPod("ns", "p"), svcprocessor.ErrClosed)
	assert.ErrorIs(t, f.sp.RegisterRenderer(&svcprocessortest.Recorder{}), svcprocessor.ErrClosed)
}

func TestHandler(t *testing.T) {
	f := newFixture(t, svcprocessor.Config{})
	var txns int
	require.NoError(t, f.sp.RegisterRenderer(svcprocessor.RendererFunc(func(ev svcprocessor.RenderEvent) error {
		switch {
		case ev.Kind == svcprocessor.Resync && ev.ResyncTxn != nil:
			ev.ResyncTxn.Put("svc/resync", &kubemodel.Service{Name: "marker"})
			txns++
		case ev.Txn != nil && ev.NewService != nil:
			ev.Txn.Put("svc/"+ev.NewService.ID.String(), &kubemodel.Service{Name: ev.NewService.ID.Name})
			txns++
		}
		return nil
	})))
	h := f.sp.Handler()
	var _ controller.EventHandler = h
	assert.Equal(t, "svcprocessor", h.String())

	handles := []struct {
		ev   controller.Event
		want bool
	}{
		{controller.NewDBResync(), true},
		{&controller.KubeStateChange{Resource: kubemodel.ServiceResource}, true},
		{&controller.KubeStateChange{Resource: kubemodel.EndpointsResource}, true},
		{&controller.KubeStateChange{Resource: kubemodel.NodeResource}, true},
		{&controller.KubeStateChange{Resource: kubemodel.PodResource}, false},
		{controller.NewAddPodEvent(pid("a", "b"), "", ""), true},
		{controller.NewDeletePodEvent(pid("a", "b"), ""), true},
		{&fakeNodeUpdate{}, true},
		{controller.NewExternalConfigChange("x", false), false},
	}
	for _, hc := range handles {
		assert.Equal(t, hc.want, h.HandlesEvent(hc.ev), hc.ev.String())
	}

	rtx := controllertest.NewTxn()
	require.NoError(t, h.Resync(controller.NewDBResync(), kubeState(nil, nil, nil), 1, rtx))
	assert.Equal(t, []string{"svc/resync"}, rtx.Keys())

	utx := controllertest.NewTxn()
	desc, err := h.Update(svcChange(nil, mkService("ns", "s", nil)), utx)
	require.NoError(t, err)
	assert.Equal(t, "service added", desc)
	assert.Equal(t, []string{"svc/ns/s"}, utx.Keys())
	assert.Equal(t, 2, txns)

	// Revert through the handler undoes AddPod.
	f.pods.Connect(pid("ns", "p"), "tap-p")
	add := controller.NewAddPodEvent(pid("ns", "p"), "c", "n")
	_, err = h.Update(add, controllertest.NewTxn())
	require.NoError(t, err)
	require.NoError(t, h.Revert(add))
	_, ok := f.sp.LocalEndpoint(pid("ns", "p"))
	assert.False(t, ok)
}

func TestSubnetsFromIPNet(t *testing.T) {
	mustNet := func(s string) *net.IPNet {
		_, n, err := net.ParseCIDR(s)
		require.NoError(t, err)
		return n
	}
	v4in6 := &net.IPNet{IP: net.ParseIP("10.1.0.0"), Mask: net.CIDRMask(112, 128)}
	tests := []struct {
		name string
		in   *net.IPNet
		want netip.Prefix
	}{
		{"ipv4", mustNet("10.1.5.0/24"), netip.MustParsePrefix("10.1.5.0/24")},
		{"ipv6", mustNet("fd00:1::/64"), netip.MustParsePrefix("fd00:1::/64")},
		{"ipv4 in 16-byte form", v4in6, netip.MustParsePrefix("10.1.0.0/16")},
		{"nil", nil, netip.Prefix{}},
		{"no mask", &net.IPNet{IP: net.ParseIP("10.0.0.0")}, netip.Prefix{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := svcprocessor.SubnetsFromIPNet(ipNetSource{tc.in, tc.in})
			assert.Equal(t, tc.want, src.PodSubnetThisNode())
			assert.Equal(t, tc.want, src.PodSubnetAllNodes())
		})
	}
}

type ipNetSource struct{ this, all *net.IPNet }

func (s ipNetSource) PodSubnetThisNode() *net.IPNet { return s.this }
func (s ipNetSource) PodSubnetAllNodes() *net.IPNet { return s.all }

func TestResyncEventData(t *testing.T) {
	ksd := kubeState(
		[]*kubemodel.Service{mkService("b", "s", nil), mkService("a", "s", nil)},
		[]*kubemodel.Endpoints{mkEndpoints("a", "s")},
		[]*kubemodel.Pod{{Namespace: "ns", Name: "p2"}, {}},
	)
	// The nameless pod is named after its key.
	ksd[kubemodel.PodResource][kubemodel.PodKey("ns", "p1")] = ksd[kubemodel.PodResource][kubemodel.PodKey("", "")]
	delete(ksd[kubemodel.PodResource], kubemodel.PodKey("", ""))
	red, err := svcprocessor.ParseResyncEventData(ksd)
	require.NoError(t, err)
	assert.Equal(t, []kubemodel.PodID{pid("ns", "p1"), pid("ns", "p2")}, red.Pods)
	require.Len(t, red.Services, 2)
	assert.Equal(t, "a", red.Services[0].Namespace)
	assert.Equal(t, "ResyncEventData <pods: 2, services: 2, endpoints: 1>", red.String())
	assert.Equal(t, "ResyncEventData <pods: 0, services: 0, endpoints: 0>", svcprocessor.NewResyncEventData().String())
	assert.True(t, slices.IsSortedFunc(red.Pods, func(a, b kubemodel.PodID) int {
		if a.String() < b.String() {
			return -1
		}
		return 1
	}))
}

// annotated returns a copy of svc with one annotation set.
func annotated(svc *kubemodel.Service, key, value string) *kubemodel.Service {
	c := proto.Clone(svc).(*kubemodel.Service)
	if c.Annotations == nil {
		c.Annotations = map[string]string{}
	}
	c.Annotations[key] = value
	return c
}

// labeled returns a copy of svc with a label set.
func labeled(svc *kubemodel.Service) *kubemodel.Service {
	c := proto.Clone(svc).(*kubemodel.Service)
	c.Labels = map[string]string{"team": "web"}
	return c
}
