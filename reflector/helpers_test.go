package reflector_test

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/embedetcd/etcdtest"
	"github.com/vswitchkit/vswitchkit/reflector"
)

func TestMain(m *testing.M) {
	code := m.Run()
	// The real control plane of the tests that need one (kube_test.go),
	// if one started; its clients' connections end with it.
	kubeCluster.Stop()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: errors on successful test run: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// testTimeout bounds waits in tests; generous because -race on a busy
// 2-core machine is slow. It is a safety net, never an assertion on speed.
const testTimeout = 2 * time.Minute

const prefix = reflector.DefaultPrefix

func startEtcd(t testing.TB) (*etcdtest.Server, *clientv3.Client) {
	t.Helper()
	srv, err := etcdtest.Start(t.TempDir())
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	cli := newClient(t, srv)
	return srv, cli
}

func newClient(t testing.TB, srv *etcdtest.Server) *clientv3.Client {
	t.Helper()
	cli, err := srv.Client()
	require.NoError(t, err)
	t.Cleanup(func() { cli.Close() })
	return cli
}

// kube is a fake clientset whose watches can be broken on demand to force
// the informers to re-list.
type kube struct {
	*fake.Clientset
	mu      sync.Mutex
	watches map[string][]*watch.RaceFreeFakeWatcher // by resource
}

func newKube(objs ...runtime.Object) *kube {
	k := &kube{Clientset: fake.NewSimpleClientset(objs...), watches: map[string][]*watch.RaceFreeFakeWatcher{}}
	k.PrependWatchReactor("*", func(action k8stesting.Action) (bool, watch.Interface, error) {
		var opts []metav1.ListOptions
		if wa, ok := action.(k8stesting.WatchActionImpl); ok {
			opts = append(opts, wa.ListOptions)
		}
		w, err := k.Tracker().Watch(action.GetResource(), action.GetNamespace(), opts...)
		if err != nil {
			return true, nil, err
		}
		if rf, ok := w.(*watch.RaceFreeFakeWatcher); ok {
			k.mu.Lock()
			k.watches[action.GetResource().Resource] = append(k.watches[action.GetResource().Resource], rf)
			k.mu.Unlock()
		}
		return true, w, nil
	})
	return k
}

// expire ends the open watches of resource (e.g. "pods") with 410 Gone, as
// an API server does when the watch fell too far behind, so the informers
// re-list.
func (k *kube) expire(resource string) {
	k.mu.Lock()
	ws := k.watches[resource]
	k.watches[resource] = nil
	k.mu.Unlock()
	for _, w := range ws {
		w.Error(&metav1.Status{Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonExpired, Message: "too old resource version"})
	}
}

// run starts r.Run and stops it when the test ends; the returned cancel
// stops it earlier and waits for Run to return.
func run(t testing.TB, r *reflector.Reflector) (cancel func()) {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	var once sync.Once
	cancel = func() {
		once.Do(func() {
			stop()
			select {
			case err := <-done:
				require.ErrorIs(t, err, context.Canceled)
			case <-time.After(testTimeout):
				t.Errorf("Run did not return")
			}
		})
	}
	t.Cleanup(cancel)
	return cancel
}

func newReflector(t testing.TB, cli *clientv3.Client, k *kube, cfg reflector.Config, extra ...reflector.Resource) *reflector.Reflector {
	t.Helper()
	if cfg.WriteTimeout == 0 {
		cfg.WriteTimeout = 2 * time.Second
	}
	if cfg.SessionTTL == 0 {
		cfg.SessionTTL = 2 * time.Second
	}
	r, err := reflector.New(cli, append(reflector.KubernetesResources(k), extra...), cfg)
	require.NoError(t, err)
	return r
}

func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func waitLeader(t testing.TB, r *reflector.Reflector) {
	t.Helper()
	eventually(t, "leadership and the first reconcile", func() bool {
		s := r.Stats()
		return s.Leader && s.Reconciles > 0
	})
}

// etcdState reads every key under prefix+"k8s/", relative to prefix.
func etcdState(t testing.TB, cli *clientv3.Client) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	resp, err := cli.Get(ctx, prefix+kubemodel.KeyRoot, clientv3.WithPrefix())
	require.NoError(t, err)
	out := map[string]string{}
	for _, kv := range resp.Kvs {
		out[strings.TrimPrefix(string(kv.Key), prefix)] = string(kv.Value)
	}
	return out
}

func revision(t testing.TB, cli *clientv3.Client) int64 {
	t.Helper()
	resp, err := cli.Get(context.Background(), "revision-probe")
	require.NoError(t, err)
	return resp.Header.Revision
}

func encode(t testing.TB, m proto.Message) string {
	t.Helper()
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	require.NoError(t, err)
	return string(b)
}

// wantState converts what the API server (the fake or a real one) holds,
// independently of the reflector's caches, into the etcd state the
// reflector must reach. Bad objects are left out.
func wantState(t testing.TB, k kubernetes.Interface) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{kubemodel.LayoutKey: string(kubemodel.FormatLayout(kubemodel.CurrentLayout))}
	nodes, err := k.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for i := range nodes.Items {
		if m, err := reflector.ConvertNode(&nodes.Items[i]); err == nil {
			out[kubemodel.NodeKey(m.Name)] = encode(t, m)
		}
	}
	pods, err := k.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for i := range pods.Items {
		if m, err := reflector.ConvertPod(&pods.Items[i]); err == nil && m.NodeName != "" {
			out[kubemodel.NodePodKey(m.NodeName, m.Namespace, m.Name)] = encode(t, m)
		}
		if m, err := reflector.ConvertPodPeer(&pods.Items[i]); err == nil && m != nil {
			out[kubemodel.PodPeerKey(m.Namespace, m.Name)] = encode(t, m)
		}
	}
	nps, err := k.NetworkingV1().NetworkPolicies("").List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for i := range nps.Items {
		if m, err := reflector.ConvertNetworkPolicy(&nps.Items[i]); err == nil {
			out[kubemodel.NetworkPolicyKey(m.Namespace, m.Name)] = encode(t, m)
		}
	}
	svcs, err := k.CoreV1().Services("").List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for i := range svcs.Items {
		if m, err := reflector.ConvertService(&svcs.Items[i]); err == nil {
			out[kubemodel.ServiceKey(m.Namespace, m.Name)] = encode(t, m)
		}
	}
	nss, err := k.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for i := range nss.Items {
		if m, err := reflector.ConvertNamespace(&nss.Items[i]); err == nil {
			out[kubemodel.NamespaceKey(m.Name)] = encode(t, m)
		}
	}
	eps, err := k.DiscoveryV1().EndpointSlices("").List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	bySvc := map[[2]string][]*discoveryv1.EndpointSlice{}
	for i := range eps.Items {
		s := &eps.Items[i]
		if svc := s.Labels[discoveryv1.LabelServiceName]; svc != "" {
			id := [2]string{s.Namespace, svc}
			bySvc[id] = append(bySvc[id], s)
		}
	}
	for id, sl := range bySvc {
		if m, _ := reflector.ConvertEndpointSlices(id[0], id[1], sl); m != nil {
			out[kubemodel.EndpointsKey(id[0], id[1])] = encode(t, m)
		}
	}
	return out
}

// waitState waits until etcd holds exactly want (keys relative to prefix).
func waitState(t testing.TB, cli *clientv3.Client, want map[string]string) {
	t.Helper()
	waitStateOf(t, cli, func() map[string]string { return want })
}

// waitStateOf waits until etcd holds exactly want() (keys relative to
// prefix), calling want again on every attempt: the state of a real API
// server moves on its own (its controllers update EndpointSlices).
func waitStateOf(t testing.TB, cli *clientv3.Client, wantFn func() map[string]string) {
	t.Helper()
	var got, want map[string]string
	deadline := time.Now().Add(testTimeout)
	for {
		want = wantFn()
		got = etcdState(t, cli)
		if maps.Equal(got, want) {
			return
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	var diff []string
	for k, v := range want {
		if g, ok := got[k]; !ok {
			diff = append(diff, "missing "+k)
		} else if g != v {
			diff = append(diff, "different "+k)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			diff = append(diff, "extra "+k)
		}
	}
	if len(diff) > 20 {
		diff = append(diff[:20], fmt.Sprintf("... %d more", len(diff)-20))
	}
	t.Fatalf("etcd state differs from the API server's:\n%s", strings.Join(diff, "\n"))
}

// Object builders.

func pod(ns, name, ip string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{NodeName: "node1", Containers: []corev1.Container{{
			Name: "c", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
		}}},
	}
	if ip != "" {
		p.Status.PodIP = ip
		p.Status.PodIPs = []corev1.PodIP{{IP: ip}}
		p.Status.HostIP = "192.168.0.1"
	}
	return p
}

func service(ns, name, clusterIP string, port int32) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{
			Type:       corev1.ServiceTypeClusterIP,
			ClusterIP:  clusterIP,
			ClusterIPs: []string{clusterIP},
			Selector:   map[string]string{"app": name},
			Ports:      []corev1.ServicePort{{Name: "http", Port: port, Protocol: corev1.ProtocolTCP}},
		},
	}
}

func slice(ns, name, svc string, port int32, ips ...string) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(port), Protocol: ptr(corev1.ProtocolTCP)}},
	}
	for _, ip := range ips {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)}, NodeName: ptr("node1")})
	}
	return s
}

func node(name, ip, cidr string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}},
		Spec:       corev1.NodeSpec{PodCIDR: cidr, PodCIDRs: []string{cidr}},
		Status:     corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}, {Type: corev1.NodeHostName, Address: name}}},
	}
}

func namespace(name string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"team": "a"}}}
}

func ptr[T any](v T) *T { return &v }

var _ = schema.GroupVersionResource{}

// logBuffer collects text logs; safe for concurrent use.
type logBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func (l *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}
