package svcprocessor_test

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/internal/testseed"
	"github.com/vswitchkit/vswitchkit/svcprocessor"
	"github.com/vswitchkit/vswitchkit/svcprocessor/svcprocessortest"
)

// world is the Kubernetes state a random change sequence builds up.
type world struct {
	svcs      map[kubemodel.ServiceID]*kubemodel.Service
	eps       map[kubemodel.ServiceID]*kubemodel.Endpoints
	connected map[kubemodel.PodID]bool
}

type propPod struct {
	id   kubemodel.PodID
	ip   string
	node string
}

var propPods = []propPod{
	{pid("a", "p0"), "10.1.1.10", thisNode},
	{pid("a", "p1"), "10.1.1.11", thisNode},
	{pid("b", "p2"), "10.1.1.12", thisNode},
	{pid("a", "p3"), "10.1.2.13", "node2"},
	{pid("b", "p4"), "192.168.16.2", "node2"},  // host network, remote
	{pid("a", "p5"), "192.168.16.1", thisNode}, // host network, local
	{pid("a", "p6"), "fd00::6", ""},            // IPv6, unknown subnet
}

func randService(r *rand.Rand, id kubemodel.ServiceID) *kubemodel.Service {
	s := &kubemodel.Service{Namespace: id.Namespace, Name: id.Name}
	s.ClusterIps = []string{fmt.Sprintf("10.96.0.%d", 1+r.IntN(5))}
	if r.IntN(3) == 0 {
		s.ClusterIps = append(s.ClusterIps, fmt.Sprintf("fd00:96::%d", 1+r.IntN(5)))
	}
	if r.IntN(5) == 0 {
		s.ClusterIps = []string{"None"}
	}
	s.Type = kubemodel.Service_Type(r.IntN(4))
	names := []string{"http", "dns", ""}
	for i, n := 0, 1+r.IntN(2); i < n; i++ {
		p := &kubemodel.ServicePort{Name: names[r.IntN(len(names))], Protocol: kubemodel.Protocol(r.IntN(3)), Port: int32(80 + r.IntN(3))}
		if s.Type == kubemodel.Service_NODE_PORT || s.Type == kubemodel.Service_LOAD_BALANCER {
			p.NodePort = int32(30000 + r.IntN(3))
		}
		s.Ports = append(s.Ports, p)
	}
	if r.IntN(3) == 0 {
		s.ExternalIps = []string{fmt.Sprintf("203.0.113.%d", r.IntN(3))}
	}
	if r.IntN(4) == 0 {
		s.LbIngressIps = []string{"198.51.100.1"}
	}
	s.ExternalTrafficPolicy = kubemodel.Service_TrafficPolicy(r.IntN(2))
	if r.IntN(3) == 0 {
		s.SessionAffinity = kubemodel.Service_CLIENT_IP
		s.SessionAffinityTimeout = int32(r.IntN(2) * 60)
	}
	return s
}

func randEndpoints(r *rand.Rand, id kubemodel.ServiceID) *kubemodel.Endpoints {
	e := &kubemodel.Endpoints{Namespace: id.Namespace, Name: id.Name}
	for i, n := 0, r.IntN(3); i < n; i++ {
		sub := &kubemodel.EndpointSubset{}
		for range 1 + r.IntN(2) {
			sub.Ports = append(sub.Ports, &kubemodel.EndpointPort{
				Name: []string{"http", "dns", ""}[r.IntN(3)], Protocol: kubemodel.Protocol(r.IntN(3)), Port: int32(8080 + r.IntN(3)),
			})
		}
		for range r.IntN(4) {
			p := propPods[r.IntN(len(propPods))]
			a := &kubemodel.EndpointAddress{Ip: p.ip, NodeName: p.node, Terminating: r.IntN(6) == 0,
				TargetRef: &kubemodel.ObjectReference{Kind: "Pod", Namespace: p.id.Namespace, Name: p.id.Name}}
			if r.IntN(3) == 0 {
				sub.NotReadyAddresses = append(sub.NotReadyAddresses, a)
			} else {
				sub.Addresses = append(sub.Addresses, a)
			}
		}
		e.Subsets = append(e.Subsets, sub)
	}
	return e
}

func (w *world) kubeState() controller.KubeStateData {
	var svcs []*kubemodel.Service
	var epss []*kubemodel.Endpoints
	var pods []*kubemodel.Pod
	for _, s := range w.svcs {
		svcs = append(svcs, s)
	}
	for _, e := range w.eps {
		epss = append(epss, e)
	}
	for _, p := range propPods {
		pods = append(pods, &kubemodel.Pod{Namespace: p.id.Namespace, Name: p.id.Name, IpAddress: p.ip})
	}
	return kubeState(svcs, epss, pods)
}

// TestResyncEqualsSequentialChanges applies random change sequences one by
// one and checks after every step that a resync of the resulting state (in
// a fresh processor and in the same one) gives exactly the state that the
// incremental updates produced, and that a renderer that only saw the
// notifications holds that same state.
func TestResyncEqualsSequentialChanges(t *testing.T) {
	const sequences, steps = 150, 60
	ids := []kubemodel.ServiceID{sid("a", "s0"), sid("a", "s1"), sid("b", "s0"), sid("b", "s2")}
	for seq := range testseed.Range(t, sequences) {
		r := rand.New(rand.NewPCG(seq, 0x5eed))
		f := newFixture(t, svcprocessor.Config{FrontendInterfaces: []string{"uplink"}})
		w := &world{
			svcs:      map[kubemodel.ServiceID]*kubemodel.Service{},
			eps:       map[kubemodel.ServiceID]*kubemodel.Endpoints{},
			connected: map[kubemodel.PodID]bool{},
		}
		require.NoError(t, f.sp.Resync(w.kubeState()))
		var log []string
		for step := range steps {
			id := ids[r.IntN(len(ids))]
			pod := propPods[r.IntN(len(propPods))].id
			var ev controller.Event
			switch op := r.IntN(10); {
			case op < 3:
				next := randService(r, id)
				ev = svcChange(w.svcs[id], next)
				w.svcs[id] = next
			case op == 3:
				if prev := w.svcs[id]; prev != nil {
					ev = svcChange(prev, nil)
					delete(w.svcs, id)
				}
			case op < 7:
				next := randEndpoints(r, id)
				ev = epsChange(w.eps[id], next)
				w.eps[id] = next
			case op == 7:
				if prev := w.eps[id]; prev != nil {
					ev = epsChange(prev, nil)
					delete(w.eps, id)
				}
			case op == 8:
				if w.connected[pod] {
					ev = controller.NewDeletePodEvent(pod, "c")
				} else {
					f.pods.Connect(pod, "tap-"+pod.Name)
					w.connected[pod] = true
					ev = controller.NewAddPodEvent(pod, "c", "ns")
				}
			default:
				var ips []netip.Addr
				for i := range r.IntN(4) {
					ips = append(ips, netip.AddrFrom4([4]byte{192, 168, 16, byte(1 + i + r.IntN(2))}))
				}
				f.nodes.Set(ips...)
				ev = &fakeNodeUpdate{}
			}
			if ev == nil {
				continue
			}
			log = append(log, ev.String())
			require.NoError(t, f.sp.Update(ev), "seq %d step %d", seq, step)
			if del, ok := ev.(*controller.DeletePod); ok {
				f.pods.Disconnect(del.Pod)
				w.connected[del.Pod] = false
			}

			incremental := normSnap(f.sp.Snapshot())
			require.Equal(t, incremental, normSnap(f.rec.State()), "seq %d step %d: renderer state differs from processor state\n%v", seq, step, log)
			require.Empty(t, f.rec.Inconsistencies(), "seq %d step %d", seq, step)

			fresh := newFixture(t, svcprocessor.Config{FrontendInterfaces: []string{"uplink"}})
			for p, ok := range w.connected {
				if ok {
					fresh.pods.Connect(p, "tap-"+p.Name)
				}
			}
			fresh.nodes.Set(f.nodes.NodeIPs()...)
			require.NoError(t, fresh.sp.Resync(w.kubeState()))
			require.Equal(t, incremental, normSnap(fresh.sp.Snapshot()), "seq %d step %d: resync differs from sequential changes\n%v", seq, step, log)
			require.NoError(t, fresh.sp.Close())
		}
		// Resync of the same processor changes nothing either.
		before := normSnap(f.sp.Snapshot())
		require.NoError(t, f.sp.Resync(w.kubeState()))
		require.Equal(t, before, normSnap(f.sp.Snapshot()), "seq %d: resync in place", seq)
		require.Equal(t, before, normSnap(f.rec.State()))
	}
}

// The recorder must fail loudly if notifications do not add up: a
// deliberately wrong sequence is reported.
func TestRecorderDetectsInconsistency(t *testing.T) {
	rec := &svcprocessortest.Recorder{}
	s := &svcprocessor.ContivService{ID: sid("a", "b")}
	require.NoError(t, rec.Render(svcprocessor.RenderEvent{Kind: svcprocessor.ServiceDeleted, OldService: s}))
	require.NoError(t, rec.Render(svcprocessor.RenderEvent{Kind: svcprocessor.ServiceAdded, NewService: s}))
	require.NoError(t, rec.Render(svcprocessor.RenderEvent{Kind: svcprocessor.ServiceAdded, NewService: s}))
	require.Len(t, rec.Inconsistencies(), 2)
}
