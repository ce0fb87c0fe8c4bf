package reflector_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/controllertest"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/reflector"
	"github.com/vswitchkit/vswitchkit/watcher"
)

// TestEachResourceReachesTheWatcher creates, updates and deletes an object
// of every built-in resource through the fake API server and checks that
// the project's watcher, reading the same etcd, delivers each step as the
// right KubeStateChange; an update of fields that are not reflected writes
// nothing (the etcd revision moves only for the next, reflected change).
func TestEachResourceReachesTheWatcher(t *testing.T) {
	_, cli := startEtcd(t)
	k := newKube()
	r := newReflector(t, cli, k, reflector.Config{})
	run(t, r)
	waitLeader(t, r)

	rec := &controllertest.EventRecorder{}
	w, err := watcher.NewWithClient(cli, rec, watcher.Config{})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = w.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	wctx, wcancel := context.WithTimeout(ctx, testTimeout)
	defer wcancel()
	evs, err := rec.WaitFor(wctx, 1)
	require.NoError(t, err)
	require.IsType(t, &controller.DBResync{}, evs[0])
	seen := 1

	// next returns the next change, skipping the pods' peer records
	// (TestPodPeerReachesTheWatcher checks those).
	next := func(t *testing.T) *controller.KubeStateChange {
		t.Helper()
		for {
			evs, err := rec.WaitFor(wctx, seen+1)
			require.NoError(t, err)
			seen++
			ch, ok := evs[seen-1].(*controller.KubeStateChange)
			require.True(t, ok, "event %d is %T", seen, evs[seen-1])
			if ch.Resource != kubemodel.PodPeerResource {
				return ch
			}
		}
	}
	core, disc := k.CoreV1(), k.DiscoveryV1()
	opts := metav1.CreateOptions{}
	uopts := metav1.UpdateOptions{}

	type resourceCase struct {
		resource, key string
		create        func(ctx context.Context) error
		createWant    proto.Message
		update        func(ctx context.Context) error
		updateWant    proto.Message
		churn         func(ctx context.Context) error // only unreflected fields
		barrier       func(ctx context.Context) error // a reflected change of another object of the resource
		barrierKey    string
		del           func(ctx context.Context) error
	}
	p := pod("default", "web", "")
	svc := service("default", "web", "10.96.0.10", 80)
	sl := slice("default", "web-abc", "web", 8080, "10.1.1.2")
	nd := node("node1", "192.168.0.1", "10.1.1.0/24")
	ns := namespace("team-a")
	np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}}}
	cases := []resourceCase{{
		resource: kubemodel.NamespaceResource, key: kubemodel.NamespaceKey("team-a"),
		create:     func(ctx context.Context) error { _, err := core.Namespaces().Create(ctx, ns, opts); return err },
		createWant: &kubemodel.Namespace{Name: "team-a", Labels: map[string]string{"team": "a"}},
		update: func(ctx context.Context) error {
			ns.Labels["team"] = "b"
			_, err := core.Namespaces().Update(ctx, ns, uopts)
			return err
		},
		updateWant: &kubemodel.Namespace{Name: "team-a", Labels: map[string]string{"team": "b"}},
		churn: func(ctx context.Context) error {
			ns.Annotations = map[string]string{"owner": "x"}
			ns.Status.Phase = corev1.NamespaceActive
			_, err := core.Namespaces().Update(ctx, ns, uopts)
			return err
		},
		barrier: func(ctx context.Context) error {
			_, err := core.Namespaces().Create(ctx, namespace("barrier"), opts)
			return err
		},
		barrierKey: kubemodel.NamespaceKey("barrier"),
		del: func(ctx context.Context) error {
			return core.Namespaces().Delete(ctx, "team-a", metav1.DeleteOptions{})
		},
	}, {
		resource: kubemodel.NodeResource, key: kubemodel.NodeKey("node1"),
		create: func(ctx context.Context) error { _, err := core.Nodes().Create(ctx, nd, opts); return err },
		createWant: &kubemodel.Node{Name: "node1", Labels: map[string]string{"kubernetes.io/hostname": "node1"}, PodCidrs: []string{"10.1.1.0/24"},
			Addresses: []*kubemodel.NodeAddress{{Type: kubemodel.NodeAddress_INTERNAL_IP, Address: "192.168.0.1"}, {Type: kubemodel.NodeAddress_HOSTNAME, Address: "node1"}}},
		update: func(ctx context.Context) error {
			nd.Status.Addresses[0].Address = "192.168.0.2"
			_, err := core.Nodes().UpdateStatus(ctx, nd, uopts)
			return err
		},
		updateWant: &kubemodel.Node{Name: "node1", Labels: map[string]string{"kubernetes.io/hostname": "node1"}, PodCidrs: []string{"10.1.1.0/24"},
			Addresses: []*kubemodel.NodeAddress{{Type: kubemodel.NodeAddress_INTERNAL_IP, Address: "192.168.0.2"}, {Type: kubemodel.NodeAddress_HOSTNAME, Address: "node1"}}},
		churn: func(ctx context.Context) error {
			nd.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now()}}
			nd.Status.NodeInfo.KubeletVersion = "v1.37.0"
			_, err := core.Nodes().UpdateStatus(ctx, nd, uopts)
			return err
		},
		barrier: func(ctx context.Context) error {
			_, err := core.Nodes().Create(ctx, node("barrier", "192.168.0.9", "10.1.9.0/24"), opts)
			return err
		},
		barrierKey: kubemodel.NodeKey("barrier"),
		del:        func(ctx context.Context) error { return core.Nodes().Delete(ctx, "node1", metav1.DeleteOptions{}) },
	}, {
		resource: kubemodel.PodResource, key: kubemodel.PodKey("default", "web"),
		create: func(ctx context.Context) error { _, err := core.Pods("default").Create(ctx, p, opts); return err },
		createWant: &kubemodel.Pod{Name: "web", Namespace: "default", Labels: map[string]string{"app": "web"}, NodeName: "node1",
			Containers: []*kubemodel.Container{{Name: "c", Ports: []*kubemodel.ContainerPort{{Name: "http", ContainerPort: 8080}}}}},
		update: func(ctx context.Context) error {
			p.Status.PodIP, p.Status.PodIPs, p.Status.HostIP = "10.1.1.2", []corev1.PodIP{{IP: "10.1.1.2"}}, "192.168.0.1"
			_, err := core.Pods("default").UpdateStatus(ctx, p, uopts)
			return err
		},
		updateWant: &kubemodel.Pod{Name: "web", Namespace: "default", Labels: map[string]string{"app": "web"}, NodeName: "node1",
			IpAddress: "10.1.1.2", IpAddresses: []string{"10.1.1.2"}, HostIpAddress: "192.168.0.1",
			Containers: []*kubemodel.Container{{Name: "c", Ports: []*kubemodel.ContainerPort{{Name: "http", ContainerPort: 8080}}}}},
		churn: func(ctx context.Context) error {
			p.Status.Phase = corev1.PodRunning
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastProbeTime: metav1.Now()}}
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", Ready: true, RestartCount: 3}}
			_, err := core.Pods("default").UpdateStatus(ctx, p, uopts)
			return err
		},
		barrier: func(ctx context.Context) error {
			// No address: no peer record, one key written.
			_, err := core.Pods("default").Create(ctx, pod("default", "barrier", ""), opts)
			return err
		},
		barrierKey: kubemodel.PodKey("default", "barrier"),
		del: func(ctx context.Context) error {
			return core.Pods("default").Delete(ctx, "web", metav1.DeleteOptions{})
		},
	}, {
		resource: kubemodel.ServiceResource, key: kubemodel.ServiceKey("default", "web"),
		create: func(ctx context.Context) error { _, err := core.Services("default").Create(ctx, svc, opts); return err },
		createWant: &kubemodel.Service{Name: "web", Namespace: "default", Selector: map[string]string{"app": "web"},
			Ports: []*kubemodel.ServicePort{{Name: "http", Port: 80}}, ClusterIps: []string{"10.96.0.10"}},
		update: func(ctx context.Context) error {
			svc.Spec.Ports[0].Port = 8080
			_, err := core.Services("default").Update(ctx, svc, uopts)
			return err
		},
		updateWant: &kubemodel.Service{Name: "web", Namespace: "default", Selector: map[string]string{"app": "web"},
			Ports: []*kubemodel.ServicePort{{Name: "http", Port: 8080}}, ClusterIps: []string{"10.96.0.10"}},
		churn: func(ctx context.Context) error {
			svc.Status.Conditions = []metav1.Condition{{Type: "Synced", Status: metav1.ConditionTrue, LastTransitionTime: metav1.Now(), Reason: "Ok"}}
			svc.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol}
			_, err := core.Services("default").Update(ctx, svc, uopts)
			return err
		},
		barrier: func(ctx context.Context) error {
			_, err := core.Services("default").Create(ctx, service("default", "barrier", "10.96.0.99", 80), opts)
			return err
		},
		barrierKey: kubemodel.ServiceKey("default", "barrier"),
		del: func(ctx context.Context) error {
			return core.Services("default").Delete(ctx, "web", metav1.DeleteOptions{})
		},
	}, {
		resource: kubemodel.EndpointsResource, key: kubemodel.EndpointsKey("default", "web"),
		create: func(ctx context.Context) error {
			_, err := disc.EndpointSlices("default").Create(ctx, sl, opts)
			return err
		},
		createWant: &kubemodel.Endpoints{Name: "web", Namespace: "default", Subsets: []*kubemodel.EndpointSubset{{
			Addresses: []*kubemodel.EndpointAddress{{Ip: "10.1.1.2", NodeName: "node1"}},
			Ports:     []*kubemodel.EndpointPort{{Name: "http", Port: 8080}},
		}}},
		update: func(ctx context.Context) error {
			sl.Endpoints = append(sl.Endpoints, discoveryv1.Endpoint{Addresses: []string{"10.1.2.3"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(false)}})
			_, err := disc.EndpointSlices("default").Update(ctx, sl, uopts)
			return err
		},
		updateWant: &kubemodel.Endpoints{Name: "web", Namespace: "default", Subsets: []*kubemodel.EndpointSubset{{
			Addresses:         []*kubemodel.EndpointAddress{{Ip: "10.1.1.2", NodeName: "node1"}},
			NotReadyAddresses: []*kubemodel.EndpointAddress{{Ip: "10.1.2.3"}},
			Ports:             []*kubemodel.EndpointPort{{Name: "http", Port: 8080}},
		}}},
		churn: func(ctx context.Context) error {
			sl.Endpoints[0].Zone = ptr("zone-a")
			sl.Endpoints[0].Hints = &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: "zone-a"}}}
			sl.Annotations = map[string]string{"endpoints.kubernetes.io/last-change-trigger-time": time.Now().String()}
			_, err := disc.EndpointSlices("default").Update(ctx, sl, uopts)
			return err
		},
		barrier: func(ctx context.Context) error {
			_, err := disc.EndpointSlices("default").Create(ctx, slice("default", "barrier-x", "barrier", 80, "10.1.1.9"), opts)
			return err
		},
		barrierKey: kubemodel.EndpointsKey("default", "barrier"),
		del: func(ctx context.Context) error {
			return disc.EndpointSlices("default").Delete(ctx, "web-abc", metav1.DeleteOptions{})
		},
	}, {
		resource: kubemodel.NetworkPolicyResource, key: kubemodel.NetworkPolicyKey("default", "web"),
		create: func(ctx context.Context) error {
			_, err := k.NetworkingV1().NetworkPolicies("default").Create(ctx, np, opts)
			return err
		},
		createWant: &kubemodel.NetworkPolicy{Name: "web", Namespace: "default",
			PodSelector: &kubemodel.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			PolicyTypes: []kubemodel.PolicyType{kubemodel.PolicyType_INGRESS}},
		update: func(ctx context.Context) error {
			np.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{}}}}}
			_, err := k.NetworkingV1().NetworkPolicies("default").Update(ctx, np, uopts)
			return err
		},
		updateWant: &kubemodel.NetworkPolicy{Name: "web", Namespace: "default",
			PodSelector: &kubemodel.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			PolicyTypes: []kubemodel.PolicyType{kubemodel.PolicyType_INGRESS},
			Ingress:     []*kubemodel.NetworkPolicyIngressRule{{From: []*kubemodel.NetworkPolicyPeer{{PodSelector: &kubemodel.LabelSelector{}}}}}},
		churn: func(ctx context.Context) error {
			np.Annotations = map[string]string{"owner": "x"}
			np.Labels = map[string]string{"team": "a"}
			_, err := k.NetworkingV1().NetworkPolicies("default").Update(ctx, np, uopts)
			return err
		},
		barrier: func(ctx context.Context) error {
			b := np.DeepCopy()
			b.Name, b.ResourceVersion = "barrier", ""
			_, err := k.NetworkingV1().NetworkPolicies("default").Create(ctx, b, opts)
			return err
		},
		barrierKey: kubemodel.NetworkPolicyKey("default", "barrier"),
		del: func(ctx context.Context) error {
			return k.NetworkingV1().NetworkPolicies("default").Delete(ctx, "web", metav1.DeleteOptions{})
		},
	}}

	for _, tc := range cases {
		t.Run(tc.resource, func(t *testing.T) {
			ctx := context.Background()
			check := func(step string, prev, want proto.Message) {
				t.Helper()
				ch := next(t)
				assert.Equal(t, tc.resource, ch.Resource, step)
				assert.Equal(t, tc.key, ch.Key, step)
				if prev == nil {
					assert.Nil(t, ch.PrevValue, step)
				} else {
					assert.True(t, proto.Equal(prev, ch.PrevValue), "%s: prev %v, want %v", step, ch.PrevValue, prev)
				}
				if want == nil {
					assert.Nil(t, ch.NewValue, step)
				} else {
					assert.True(t, proto.Equal(want, ch.NewValue), "%s: got %v, want %v", step, ch.NewValue, want)
				}
			}
			require.NoError(t, tc.create(ctx))
			check("create", nil, tc.createWant)
			require.NoError(t, tc.update(ctx))
			check("update", tc.createWant, tc.updateWant)

			if tc.resource == kubemodel.PodResource {
				// The update gave the pod an address: its peer record is
				// written too, maybe in a later batch than the pod.
				eventually(t, "the pod's peer record", func() bool { return r.Stats().Resources[kubemodel.PodPeerResource].Puts == 1 })
			}
			rev := revision(t, cli)
			require.NoError(t, tc.churn(ctx))
			require.NoError(t, tc.barrier(ctx))
			ch := next(t)
			require.Equal(t, tc.barrierKey, ch.Key, "the change of unreflected fields must not reach the watcher")
			assert.Equal(t, rev+1, revision(t, cli), "only the barrier was written")

			require.NoError(t, tc.del(ctx))
			check("delete", tc.updateWant, nil)
		})
	}
	// The counters follow the commit that the watcher already saw.
	eventually(t, "the counters of the last delete", func() bool { return r.Stats().Resources[kubemodel.NetworkPolicyResource].Deletes == 1 })
	s := r.Stats()
	for _, name := range []string{kubemodel.PodResource, kubemodel.ServiceResource, kubemodel.EndpointsResource, kubemodel.NodeResource, kubemodel.NamespaceResource, kubemodel.NetworkPolicyResource} {
		rs := s.Resources[name]
		assert.EqualValues(t, 3, rs.Puts, "%s puts: create, update and the barrier", name)
		assert.EqualValues(t, 1, rs.Deletes, name)
		assert.Equal(t, 1, rs.Objects, "%s: the barrier remains", name)
	}
}

// TestPodPeerReachesTheWatcher: a pod's peer record appears with its first
// address, follows its labels and named ports, ignores what it does not
// hold (status conditions, annotations), and goes with the pod; it comes
// from the pods' informer (one watch for both).
func TestPodPeerReachesTheWatcher(t *testing.T) {
	_, cli := startEtcd(t)
	k := newKube()
	r := newReflector(t, cli, k, reflector.Config{})
	run(t, r)
	waitLeader(t, r)
	ctx := context.Background()
	get := func() *kubemodel.PodPeer {
		resp, err := cli.Get(ctx, prefix+kubemodel.PodPeerKey("default", "web"))
		require.NoError(t, err)
		if len(resp.Kvs) == 0 {
			return nil
		}
		m := &kubemodel.PodPeer{}
		require.NoError(t, proto.Unmarshal(resp.Kvs[0].Value, m))
		return m
	}
	p := pod("default", "web", "")
	p, err := k.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{})
	require.NoError(t, err)
	eventually(t, "the pod", func() bool { return r.Stats().Resources[kubemodel.PodResource].Puts == 1 })
	assert.Nil(t, get(), "no address, no peer record")

	p.Status.PodIP, p.Status.PodIPs = "10.1.1.2", []corev1.PodIP{{IP: "10.1.1.2"}}
	p, err = k.CoreV1().Pods("default").UpdateStatus(ctx, p, metav1.UpdateOptions{})
	require.NoError(t, err)
	eventually(t, "the peer record", func() bool { return get() != nil })
	assert.True(t, proto.Equal(&kubemodel.PodPeer{Namespace: "default", Name: "web", NodeName: "node1", IpAddresses: []string{"10.1.1.2"},
		Labels: map[string]string{"app": "web"}, Ports: []*kubemodel.NamedPort{{Name: "http", Port: 8080}}}, get()), "got %v", get())

	rev := revision(t, cli)
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	p.Annotations = map[string]string{"x": "y"}
	p, err = k.CoreV1().Pods("default").UpdateStatus(ctx, p, metav1.UpdateOptions{})
	require.NoError(t, err)
	p.Labels["app"] = "api"
	_, err = k.CoreV1().Pods("default").Update(ctx, p, metav1.UpdateOptions{})
	require.NoError(t, err)
	eventually(t, "the label change", func() bool { return get().GetLabels()["app"] == "api" })
	// The annotation change wrote the pod once, the label change the pod
	// and its peer record: 3 writes (the reflector batches, so 3 or fewer
	// revisions), never a peer record for the status change alone.
	assert.LessOrEqual(t, revision(t, cli), rev+3)
	s := r.Stats().Resources[kubemodel.PodPeerResource]
	assert.EqualValues(t, 2, s.Puts, "created, relabelled")

	require.NoError(t, k.CoreV1().Pods("default").Delete(ctx, "web", metav1.DeleteOptions{}))
	eventually(t, "the peer record goes", func() bool { return get() == nil })
	assert.Zero(t, r.Stats().Resources[kubemodel.PodResource].Relists, "one informer, listed once")
}

// TestPodsStoredPerNode: a pod is stored under its node's key
// (kubemodel.NodePodKey) once it is scheduled (not before), and a pod made
// again under the same name on another node moves: its old key goes.
func TestPodsStoredPerNode(t *testing.T) {
	_, cli := startEtcd(t)
	k := newKube()
	r := newReflector(t, cli, k, reflector.Config{})
	run(t, r)
	waitLeader(t, r)
	ctx := context.Background()

	pending := pod("default", "web", "")
	pending.Spec.NodeName = ""
	_, err := k.CoreV1().Pods("default").Create(ctx, pending, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = k.CoreV1().Services("default").Create(ctx, service("default", "marker", "10.96.0.1", 80), metav1.CreateOptions{})
	require.NoError(t, err)
	waitState(t, cli, wantState(t, k))
	assert.NotContains(t, etcdState(t, cli), kubemodel.PodKey("default", "web"), "not scheduled: not stored")

	_, err = k.CoreV1().Pods("default").Update(ctx, pod("default", "web", "10.1.1.2"), metav1.UpdateOptions{})
	require.NoError(t, err)
	waitState(t, cli, wantState(t, k))
	assert.Contains(t, etcdState(t, cli), kubemodel.NodePodKey("node1", "default", "web"))

	require.NoError(t, k.CoreV1().Pods("default").Delete(ctx, "web", metav1.DeleteOptions{}))
	moved := pod("default", "web", "10.1.2.2")
	moved.Spec.NodeName = "node2"
	_, err = k.CoreV1().Pods("default").Create(ctx, moved, metav1.CreateOptions{})
	require.NoError(t, err)
	want := wantState(t, k)
	require.Contains(t, want, kubemodel.NodePodKey("node2", "default", "web"))
	require.NotContains(t, want, kubemodel.NodePodKey("node1", "default", "web"))
	waitState(t, cli, want)
}
