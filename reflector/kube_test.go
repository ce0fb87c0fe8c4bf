package reflector_test

// The reflector against a real control plane (internal/kubetest): a
// kube-apiserver with RBAC on and a kube-controller-manager making the
// EndpointSlices, on their own etcd; the reflector writes into another
// etcd, the agents'. These tests skip when the binaries are not built
// (tools/kube/build) or VSWITCHKIT_KUBE=off.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/embedetcd/etcdtest"
	"github.com/vswitchkit/vswitchkit/internal/kubetest"
	"github.com/vswitchkit/vswitchkit/reflector"
)

// kubeCluster is the package's control plane, started by the first test
// that needs it and stopped by TestMain.
var kubeCluster = &kubetest.Shared{
	Config: kubetest.Config{ControllerManager: true},
	Etcd:   startAPIEtcd,
}

// apiEtcd is the API server's etcd (compaction is forced through it).
var apiEtcd *etcdtest.Server

func startAPIEtcd(dir string) ([]string, func(), error) {
	srv, err := etcdtest.Start(dir)
	if err != nil {
		return nil, nil, err
	}
	apiEtcd = srv
	return []string{"http://" + srv.Endpoint()}, srv.Close, nil
}

// realEnv is a test's view of the control plane: the admin's client, the
// reflector's identity (the service account of deploy/reflector.yaml
// with its RBAC), and an etcd of the agents for the reflector.
type realEnv struct {
	c     *kubetest.Cluster
	admin kubernetes.Interface
	refl  *rest.Config // the reflector's service account
	etcd  *etcdtest.Server
	cli   *clientv3.Client
}

var rbacOnce sync.Once

// newRealEnv returns the environment of a test; it skips without the
// binaries.
func newRealEnv(t *testing.T) *realEnv {
	t.Helper()
	c := kubeCluster.Get(t)
	ctx := context.Background()
	var err error
	rbacOnce.Do(func() { err = applyReflectorRBAC(ctx, c) })
	require.NoError(t, err)
	cfg, err := c.ServiceAccountConfig(ctx, "kube-system", "vswitchkit-reflector")
	require.NoError(t, err)
	srv, cli := startEtcd(t)
	return &realEnv{c: c, admin: c.Admin(), refl: cfg, etcd: srv, cli: cli}
}

// applyReflectorRBAC applies the reflector's service account, roles and
// bindings from deploy/reflector.yaml (and the namespace of its Role,
// deploy/namespace.yaml): the tests run the reflector with exactly the
// permissions a deployment gives it.
func applyReflectorRBAC(ctx context.Context, c *kubetest.Cluster) error {
	var objs []*unstructured.Unstructured
	for _, f := range []string{"namespace.yaml", "reflector.yaml"} {
		b, err := os.ReadFile(filepath.Join("..", "deploy", f))
		if err != nil {
			return err
		}
		o, err := kubetest.DecodeYAML(b)
		if err != nil {
			return err
		}
		objs = append(objs, o...)
	}
	objs = slices.DeleteFunc(objs, func(o *unstructured.Unstructured) bool { return o.GetKind() == "Deployment" })
	_, err := kubetest.Apply(ctx, c.AdminConfig(), objs, kubetest.ApplyOptions{})
	return err
}

// reflector starts a reflector of the built-in resources through the
// reflector's identity, writing into the environment's etcd.
func (e *realEnv) reflector(t *testing.T, cli *clientv3.Client, cfg reflector.Config) *reflector.Reflector {
	t.Helper()
	kube, err := kubernetes.NewForConfig(e.refl)
	require.NoError(t, err)
	if cfg.SessionTTL == 0 {
		cfg.SessionTTL = 2 * time.Second
	}
	r, err := reflector.New(cli, reflector.KubernetesResources(kube), cfg)
	require.NoError(t, err)
	return r
}

// waitReal waits until the reflector's etcd holds exactly what the API
// server holds, converted.
func (e *realEnv) waitReal(t *testing.T) {
	t.Helper()
	waitStateOf(t, e.cli, func() map[string]string { return wantState(t, e.admin) })
}

// Objects as a real API server takes them: pods have images, and their
// status is set through the status subresource, as the kubelet does.

func realNode(name, ip, cidr string) *corev1.Node {
	n := node(name, ip, cidr)
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now()}}
	return n
}

func realPod(ns, name, nodeName string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{
			Name: "c", Image: "registry.k8s.io/pause:3.10",
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
		}}},
	}
}

// createPod creates a pod and, with an ip, reports it running and ready
// (or running and not ready) through the status subresource. A new
// namespace has no default service account for a moment, and the
// ServiceAccount admission plugin refuses pods until the controller made
// it: that is retried.
func createPod(t *testing.T, kube kubernetes.Interface, p *corev1.Pod, ip string, ready bool) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	var got *corev1.Pod
	eventually(t, "the pod admitted", func() bool {
		var err error
		got, err = kube.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{})
		if err != nil && apierrors.IsForbidden(err) && strings.Contains(err.Error(), "service account") {
			return false
		}
		require.NoError(t, err)
		return true
	})
	if ip == "" {
		return got
	}
	return setPodStatus(t, kube, got, ip, ready)
}

func setPodStatus(t *testing.T, kube kubernetes.Interface, p *corev1.Pod, ip string, ready bool) *corev1.Pod {
	t.Helper()
	cond := corev1.ConditionFalse
	if ready {
		cond = corev1.ConditionTrue
	}
	p = p.DeepCopy()
	p.Status = corev1.PodStatus{
		Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}},
		HostIP: "192.168.0.1", HostIPs: []corev1.HostIP{{IP: "192.168.0.1"}},
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: cond}, {Type: corev1.ContainersReady, Status: cond}},
	}
	got, err := kube.CoreV1().Pods(p.Namespace).UpdateStatus(context.Background(), p, metav1.UpdateOptions{})
	require.NoError(t, err)
	return got
}

// forceDelete deletes a pod at once, as `kubectl delete --grace-period=0
// --force` does: without a kubelet a pod deleted gracefully stays
// Terminating forever.
func forceDelete(t *testing.T, kube kubernetes.Interface, ns, name string) {
	t.Helper()
	err := kube.CoreV1().Pods(ns).Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))})
	if !apierrors.IsNotFound(err) {
		require.NoError(t, err)
	}
}

func createNamespace(t *testing.T, kube kubernetes.Interface, name string, labels map[string]string) {
	t.Helper()
	_, err := kube.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{})
	require.NoError(t, err)
}

func realService(ns, name string, selector map[string]string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{
			Selector: selector,
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http"), Protocol: corev1.ProtocolTCP}},
		},
	}
}

// modRevision returns the mod revision of a key (relative to prefix), 0
// when it is absent.
func modRevision(t *testing.T, cli *clientv3.Client, key string) int64 {
	t.Helper()
	resp, err := cli.Get(context.Background(), prefix+key)
	require.NoError(t, err)
	if len(resp.Kvs) == 0 {
		return 0
	}
	return resp.Kvs[0].ModRevision
}

// assertNoPodKey asserts that no key of the pod is in etcd: under no node,
// nor a flat one.
func assertNoPodKey(t *testing.T, cli *clientv3.Client, ns, name string) {
	t.Helper()
	resp, err := cli.Get(context.Background(), prefix+kubemodel.NodePodKeyPrefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	require.NoError(t, err)
	for _, kv := range resp.Kvs {
		_, id, err := kubemodel.ParseNodePodKey(strings.TrimPrefix(string(kv.Key), prefix))
		require.NoError(t, err)
		assert.NotEqual(t, kubemodel.PodID{Namespace: ns, Name: name}, id, "pod key %s", kv.Key)
	}
	assert.Zero(t, modRevision(t, cli, kubemodel.PodKey(ns, name)), "a flat pod key")
}

// waitKey waits until the key (relative to prefix) exists.
func waitKey(t *testing.T, cli *clientv3.Client, key string) {
	t.Helper()
	eventually(t, key+" in etcd", func() bool { return modRevision(t, cli, key) != 0 })
}

// endpointsOf reads the reflected endpoints of a service.
func endpointsOf(t *testing.T, cli *clientv3.Client, ns, name string) *kubemodel.Endpoints {
	t.Helper()
	resp, err := cli.Get(context.Background(), prefix+kubemodel.EndpointsKey(ns, name))
	require.NoError(t, err)
	if len(resp.Kvs) == 0 {
		return nil
	}
	ep := &kubemodel.Endpoints{}
	require.NoError(t, proto.Unmarshal(resp.Kvs[0].Value, ep))
	return ep
}

// TestKubeEveryResource: every built-in resource reaches etcd in the
// watcher's layout from a real API server through the RBAC of
// deploy/reflector.yaml: namespaces, nodes, pods (running and ready
// through the status subresource) and their peer records, a service with
// the EndpointSlices the real controller manager made of it (the ready
// pods' addresses ready, the not-ready pod's not), network policies.
// Reflected updates arrive; updates of only unreflected fields (status
// heartbeats and conditions, annotations of namespaces and policies) write
// nothing: the keys' revisions
// stay while later changes of the same resources arrive. Deletions
// remove the keys.
func TestKubeEveryResource(t *testing.T) {
	e := newRealEnv(t)
	r := e.reflector(t, e.cli, reflector.Config{})
	run(t, r)
	waitLeader(t, r)
	ctx := context.Background()
	core := e.admin.CoreV1()

	createNamespace(t, e.admin, "every", map[string]string{"team": "a"})
	_, err := core.Nodes().Create(ctx, realNode("every-n1", "192.168.0.1", "10.1.1.0/24"), metav1.CreateOptions{})
	require.NoError(t, err)
	web := map[string]string{"app": "web"}
	p1 := createPod(t, e.admin, realPod("every", "web-1", "every-n1", web), "10.1.1.2", true)
	createPod(t, e.admin, realPod("every", "web-2", "every-n1", web), "10.1.1.3", true)
	createPod(t, e.admin, realPod("every", "web-3", "every-n1", web), "10.1.1.4", false)
	createPod(t, e.admin, realPod("every", "pending", "every-n1", web), "", false)
	_, err = core.Services("every").Create(ctx, realService("every", "web", web), metav1.CreateOptions{})
	require.NoError(t, err)
	np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "every", Name: "web"},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: web},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}}}
	_, err = e.admin.NetworkingV1().NetworkPolicies("every").Create(ctx, np, metav1.CreateOptions{})
	require.NoError(t, err)
	e.waitReal(t)
	// The per-node layout: the layout key, each pod under its node.
	lr, err := e.cli.Get(ctx, prefix+kubemodel.LayoutKey)
	require.NoError(t, err)
	require.Len(t, lr.Kvs, 1, "the layout key")
	assert.Equal(t, kubemodel.FormatLayout(kubemodel.CurrentLayout), lr.Kvs[0].Value)
	waitKey(t, e.cli, kubemodel.NodePodKey("every-n1", "every", "web-2"))
	assert.Zero(t, modRevision(t, e.cli, kubemodel.PodKey("every", "web-2")), "a flat pod key")

	// A pod the scheduler has not placed yet is not stored; a real API
	// server places it through the binding subresource (its nodeName
	// cannot be updated: the fake took any update), and its key appears
	// under the node.
	unsched := createPod(t, e.admin, realPod("every", "unscheduled", "", web), "", false)
	_, err = core.Nodes().Create(ctx, realNode("every-n2", "192.168.0.2", "10.1.2.0/24"), metav1.CreateOptions{})
	require.NoError(t, err)
	e.waitReal(t)
	assertNoPodKey(t, e.cli, "every", "unscheduled")
	moved := unsched.DeepCopy()
	moved.Spec.NodeName = "every-n2"
	_, err = core.Pods("every").Update(ctx, moved, metav1.UpdateOptions{})
	require.True(t, apierrors.IsInvalid(err), "nodeName updated: %v", err)
	require.NoError(t, core.Pods("every").Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: "every", Name: "unscheduled"},
		Target: corev1.ObjectReference{Kind: "Node", Name: "every-n2"}}, metav1.CreateOptions{}))
	waitKey(t, e.cli, kubemodel.NodePodKey("every-n2", "every", "unscheduled"))
	forceDelete(t, e.admin, "every", "unscheduled")

	// A pod cannot move in Kubernetes (nodeName is immutable once set), but
	// one deleted and made again under its name on another node does: its
	// key moves from one node's subtree to the other's.
	forceDelete(t, e.admin, "every", "web-2")
	createPod(t, e.admin, realPod("every", "web-2", "every-n2", web), "10.1.2.3", true)
	e.waitReal(t)
	assert.Zero(t, modRevision(t, e.cli, kubemodel.NodePodKey("every-n1", "every", "web-2")), "the old node's key")
	assert.NotZero(t, modRevision(t, e.cli, kubemodel.NodePodKey("every-n2", "every", "web-2")), "the new node's key")

	// The controller manager's slices, merged: two ready addresses and one
	// not ready, on the pods' named port.
	eventually(t, "the endpoints of every/web", func() bool {
		ep := endpointsOf(t, e.cli, "every", "web")
		return ep != nil && len(ep.GetSubsets()) == 1 && len(ep.GetSubsets()[0].GetAddresses()) == 2 && len(ep.GetSubsets()[0].GetNotReadyAddresses()) == 1
	})
	ep := endpointsOf(t, e.cli, "every", "web")
	var ready []string
	for _, a := range ep.GetSubsets()[0].GetAddresses() {
		ready = append(ready, a.GetIp())
	}
	slices.Sort(ready)
	assert.Equal(t, []string{"10.1.1.2", "10.1.2.3"}, ready)
	assert.Equal(t, "10.1.1.4", ep.GetSubsets()[0].GetNotReadyAddresses()[0].GetIp())
	require.Len(t, ep.GetSubsets()[0].GetPorts(), 1)
	assert.EqualValues(t, 8080, ep.GetSubsets()[0].GetPorts()[0].GetPort())

	// Reflected updates.
	nsObj, err := core.Namespaces().Get(ctx, "every", metav1.GetOptions{})
	require.NoError(t, err)
	nsObj.Labels["team"] = "b"
	_, err = core.Namespaces().Update(ctx, nsObj, metav1.UpdateOptions{})
	require.NoError(t, err)
	p1, err = core.Pods("every").Get(ctx, p1.Name, metav1.GetOptions{})
	require.NoError(t, err)
	p1.Labels["tier"] = "front"
	_, err = core.Pods("every").Update(ctx, p1, metav1.UpdateOptions{})
	require.NoError(t, err)
	svc, err := core.Services("every").Get(ctx, "web", metav1.GetOptions{})
	require.NoError(t, err)
	svc.Spec.Ports[0].Port = 8000
	_, err = core.Services("every").Update(ctx, svc, metav1.UpdateOptions{})
	require.NoError(t, err)
	e.waitReal(t)

	// Unreflected updates: the keys keep their revisions while a later,
	// reflected change of each resource (its informer delivers in order)
	// arrives.
	keys := []string{kubemodel.NamespaceKey("every"), kubemodel.NodeKey("every-n1"), kubemodel.NodePodKey("every-n1", "every", "web-1"),
		kubemodel.PodPeerKey("every", "web-1"), kubemodel.ServiceKey("every", "web"), kubemodel.NetworkPolicyKey("every", "web"),
		kubemodel.EndpointsKey("every", "web")}
	revs := map[string]int64{}
	for _, k := range keys {
		revs[k] = modRevision(t, e.cli, k)
		require.NotZero(t, revs[k], k)
	}
	nsObj, err = core.Namespaces().Get(ctx, "every", metav1.GetOptions{})
	require.NoError(t, err)
	nsObj.Annotations = map[string]string{"owner": "x"}
	_, err = core.Namespaces().Update(ctx, nsObj, metav1.UpdateOptions{})
	require.NoError(t, err)
	nd, err := core.Nodes().Get(ctx, "every-n1", metav1.GetOptions{})
	require.NoError(t, err)
	nd.Status.Conditions[0].LastHeartbeatTime = metav1.NewTime(time.Now().Add(time.Second))
	nd.Status.NodeInfo.KubeletVersion = kubetest.Version
	_, err = core.Nodes().UpdateStatus(ctx, nd, metav1.UpdateOptions{})
	require.NoError(t, err)
	p1, err = core.Pods("every").Get(ctx, "web-1", metav1.GetOptions{})
	require.NoError(t, err)
	p1.Status.Conditions = append(p1.Status.Conditions, corev1.PodCondition{Type: "example.com/checked", Status: corev1.ConditionTrue})
	p1.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", Image: "registry.k8s.io/pause:3.10", Ready: true, RestartCount: 1}}
	_, err = core.Pods("every").UpdateStatus(ctx, p1, metav1.UpdateOptions{})
	require.NoError(t, err)
	svc, err = core.Services("every").Get(ctx, "web", metav1.GetOptions{})
	require.NoError(t, err)
	svc.Status.Conditions = []metav1.Condition{{Type: "example.com/Checked", Status: metav1.ConditionTrue, Reason: "Test", LastTransitionTime: metav1.Now()}}
	_, err = core.Services("every").UpdateStatus(ctx, svc, metav1.UpdateOptions{})
	require.NoError(t, err)
	npObj, err := e.admin.NetworkingV1().NetworkPolicies("every").Get(ctx, "web", metav1.GetOptions{})
	require.NoError(t, err)
	npObj.Annotations = map[string]string{"owner": "x"}
	_, err = e.admin.NetworkingV1().NetworkPolicies("every").Update(ctx, npObj, metav1.UpdateOptions{})
	require.NoError(t, err)
	// The barriers: one reflected change per informer.
	createNamespace(t, e.admin, "every-barrier", nil)
	_, err = core.Nodes().Create(ctx, realNode("every-barrier", "192.168.0.9", "10.1.9.0/24"), metav1.CreateOptions{})
	require.NoError(t, err)
	createPod(t, e.admin, realPod("every", "barrier", "every-n1", map[string]string{"app": "barrier"}), "10.1.1.9", true)
	_, err = core.Services("every").Create(ctx, realService("every", "barrier", map[string]string{"app": "barrier"}), metav1.CreateOptions{})
	require.NoError(t, err)
	np2 := np.DeepCopy()
	np2.Name = "barrier"
	_, err = e.admin.NetworkingV1().NetworkPolicies("every").Create(ctx, np2, metav1.CreateOptions{})
	require.NoError(t, err)
	for _, k := range []string{kubemodel.NamespaceKey("every-barrier"), kubemodel.NodeKey("every-barrier"), kubemodel.PodPeerKey("every", "barrier"),
		kubemodel.ServiceKey("every", "barrier"), kubemodel.NetworkPolicyKey("every", "barrier"), kubemodel.EndpointsKey("every", "barrier")} {
		waitKey(t, e.cli, k)
	}
	for _, k := range keys {
		assert.Equal(t, revs[k], modRevision(t, e.cli, k), "%s rewritten by an unreflected change", k)
	}
	e.waitReal(t)

	// Deletions.
	for _, name := range []string{"web-1", "web-2", "web-3", "pending", "barrier"} {
		forceDelete(t, e.admin, "every", name)
	}
	require.NoError(t, core.Services("every").Delete(ctx, "web", metav1.DeleteOptions{}))
	require.NoError(t, e.admin.NetworkingV1().NetworkPolicies("every").Delete(ctx, "web", metav1.DeleteOptions{}))
	require.NoError(t, core.Nodes().Delete(ctx, "every-n1", metav1.DeleteOptions{}))
	require.NoError(t, core.Nodes().Delete(ctx, "every-n2", metav1.DeleteOptions{}))
	require.NoError(t, core.Namespaces().Delete(ctx, "every-barrier", metav1.DeleteOptions{}))
	e.waitReal(t)
	for _, k := range []string{kubemodel.NodePodKey("every-n1", "every", "web-1"), kubemodel.PodPeerKey("every", "web-1"), kubemodel.ServiceKey("every", "web"),
		kubemodel.EndpointsKey("every", "web"), kubemodel.NetworkPolicyKey("every", "web"), kubemodel.NodeKey("every-n1")} {
		assert.Zero(t, modRevision(t, e.cli, k), "%s still in etcd", k)
	}
	eventually(t, "namespace every-barrier finalized", func() bool {
		return modRevision(t, e.cli, kubemodel.NamespaceKey("every-barrier")) == 0
	})
	s := r.Stats()
	for name, rs := range s.Resources {
		assert.Zero(t, rs.BadObjects, name)
	}
}

// TestKubeTerminating: what a cluster without kubelets does with
// deletions. A pod deleted gracefully stays Terminating (its
// deletionTimestamp set, its IP kept): it still exists, so its key stays,
// and the controller manager turns its endpoint not ready (terminating).
// A namespace deleted while it holds such a pod stays Terminating, held
// by its "kubernetes" finalizer until the namespace controller has
// emptied it: its key stays too. Once the pod is deleted for good, both
// keys go.
func TestKubeTerminating(t *testing.T) {
	e := newRealEnv(t)
	r := e.reflector(t, e.cli, reflector.Config{})
	run(t, r)
	waitLeader(t, r)
	ctx := context.Background()
	core := e.admin.CoreV1()
	createNamespace(t, e.admin, "term", nil)
	_, err := core.Nodes().Create(ctx, realNode("term-n1", "192.168.1.1", "10.1.2.0/24"), metav1.CreateOptions{})
	require.NoError(t, err)
	app := map[string]string{"app": "term"}
	createPod(t, e.admin, realPod("term", "a", "term-n1", app), "10.1.2.2", true)
	_, err = core.Services("term").Create(ctx, realService("term", "svc", app), metav1.CreateOptions{})
	require.NoError(t, err)
	eventually(t, "the pod's endpoint ready", func() bool {
		ep := endpointsOf(t, e.cli, "term", "svc")
		return ep != nil && len(ep.GetSubsets()) == 1 && len(ep.GetSubsets()[0].GetAddresses()) == 1
	})

	require.NoError(t, core.Pods("term").Delete(ctx, "a", metav1.DeleteOptions{}))
	require.NoError(t, core.Namespaces().Delete(ctx, "term", metav1.DeleteOptions{}))
	eventually(t, "the terminating pod's endpoint not ready", func() bool {
		ep := endpointsOf(t, e.cli, "term", "svc")
		return ep != nil && len(ep.GetSubsets()) == 1 && len(ep.GetSubsets()[0].GetAddresses()) == 0 && len(ep.GetSubsets()[0].GetNotReadyAddresses()) == 1
	})
	p, err := core.Pods("term").Get(ctx, "a", metav1.GetOptions{})
	require.NoError(t, err)
	assert.NotNil(t, p.DeletionTimestamp, "Terminating")
	ns, err := core.Namespaces().Get(ctx, "term", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, corev1.NamespaceTerminating, ns.Status.Phase)
	assert.Contains(t, ns.Spec.Finalizers, corev1.FinalizerKubernetes)
	assert.NotZero(t, modRevision(t, e.cli, kubemodel.NodePodKey("term-n1", "term", "a")), "a Terminating pod still exists")
	assert.NotZero(t, modRevision(t, e.cli, kubemodel.NamespaceKey("term")), "a Terminating namespace still exists")
	e.waitReal(t)

	forceDelete(t, e.admin, "term", "a")
	eventually(t, "the namespace gone", func() bool {
		_, err := core.Namespaces().Get(ctx, "term", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	e.waitReal(t)
	assert.Zero(t, modRevision(t, e.cli, kubemodel.NamespaceKey("term")))
	assert.Zero(t, modRevision(t, e.cli, kubemodel.EndpointsKey("term", "svc")))
	require.NoError(t, core.Nodes().Delete(ctx, "term-n1", metav1.DeleteOptions{}))
}

// TestKubeEndpointSlices: the shapes of EndpointSlices the fake never
// showed, made by the real controller manager and merged into one value
// per service. Pods whose named port has different numbers get one slice
// per port number; a service whose selector matches no pod gets a slice
// with no endpoints and "ports: null" (reflected as no endpoints); a
// selector-less service gets no slice (and no endpoints key).
func TestKubeEndpointSlices(t *testing.T) {
	e := newRealEnv(t)
	r := e.reflector(t, e.cli, reflector.Config{})
	run(t, r)
	waitLeader(t, r)
	ctx := context.Background()
	core := e.admin.CoreV1()
	createNamespace(t, e.admin, "slices", nil)
	_, err := core.Nodes().Create(ctx, realNode("slices-n1", "192.168.2.1", "10.1.3.0/24"), metav1.CreateOptions{})
	require.NoError(t, err)
	app := map[string]string{"app": "multi"}
	createPod(t, e.admin, realPod("slices", "a", "slices-n1", app), "10.1.3.2", true)
	p := realPod("slices", "b", "slices-n1", app)
	p.Spec.Containers[0].Ports[0].ContainerPort = 9090
	createPod(t, e.admin, p, "10.1.3.3", true)
	for _, s := range []*corev1.Service{
		realService("slices", "multi", app),
		realService("slices", "nobody", map[string]string{"app": "nobody"}),
		realService("slices", "manual", nil),
	} {
		_, err = core.Services("slices").Create(ctx, s, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	eventually(t, "two slices of slices/multi", func() bool {
		l, err := e.admin.DiscoveryV1().EndpointSlices("slices").List(ctx, metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=multi"})
		require.NoError(t, err)
		return len(l.Items) == 2
	})
	l, err := e.admin.DiscoveryV1().EndpointSlices("slices").List(ctx, metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=nobody"})
	require.NoError(t, err)
	require.Len(t, l.Items, 1)
	assert.Nil(t, l.Items[0].Ports, "ports: null")
	assert.Empty(t, l.Items[0].Endpoints)
	e.waitReal(t)
	ep := endpointsOf(t, e.cli, "slices", "multi")
	require.NotNil(t, ep)
	got := map[string]int32{}
	for _, ss := range ep.GetSubsets() {
		for _, a := range ss.GetAddresses() {
			for _, port := range ss.GetPorts() {
				got[a.GetIp()] = port.GetPort()
			}
		}
	}
	assert.Equal(t, map[string]int32{"10.1.3.2": 8080, "10.1.3.3": 9090}, got)
	assert.Zero(t, modRevision(t, e.cli, kubemodel.EndpointsKey("slices", "manual")))

	for _, name := range []string{"a", "b"} {
		forceDelete(t, e.admin, "slices", name)
	}
	require.NoError(t, core.Namespaces().Delete(ctx, "slices", metav1.DeleteOptions{}))
	require.NoError(t, core.Nodes().Delete(ctx, "slices-n1", metav1.DeleteOptions{}))
}

// deletesOfPresent returns the recorded deletions of keys whose objects
// exist in want (the final state): a watching agent would have seen a
// present object vanish.
func deletesOfPresent(events []*clientv3.Event, want map[string]string) []string {
	var out []string
	for _, ev := range events {
		key := strings.TrimPrefix(string(ev.Kv.Key), prefix)
		if _, ok := want[key]; ok && ev.Type == mvccpb.DELETE {
			out = append(out, key)
		}
	}
	return out
}

// restartLag restarts the API server (gracefully, or killing it) and
// returns how long after it answered /readyz again a change of every
// resource made then (a node's, a namespace's, a pod's and a network
// policy's labels, a service's port) took to reach etcd: the slowest
// informer is when changes flow again.
func restartLag(t *testing.T, e *realEnv, kill bool, gen int) time.Duration {
	t.Helper()
	ctx := context.Background()
	e.c.StopAPIServer(kill)
	require.NoError(t, e.c.StartAPIServer(ctx))
	ready := time.Now()
	label := fmt.Sprint(gen)
	core := e.admin.CoreV1()
	change := func(what string, f func() error) {
		eventually(t, what, func() bool { return f() == nil })
	}
	change("a node labelled", func() error {
		n, err := core.Nodes().Get(ctx, "restart-n1", metav1.GetOptions{})
		if err == nil {
			n.Labels["gen"] = label
			_, err = core.Nodes().Update(ctx, n, metav1.UpdateOptions{})
		}
		return err
	})
	change("a namespace labelled", func() error {
		n, err := core.Namespaces().Get(ctx, "restart", metav1.GetOptions{})
		if err == nil {
			n.Labels = map[string]string{"gen": label}
			_, err = core.Namespaces().Update(ctx, n, metav1.UpdateOptions{})
		}
		return err
	})
	change("a pod labelled", func() error {
		p, err := core.Pods("restart").Get(ctx, "p0", metav1.GetOptions{})
		if err == nil {
			p.Labels["gen"] = label
			_, err = core.Pods("restart").Update(ctx, p, metav1.UpdateOptions{})
		}
		return err
	})
	change("a service's port", func() error {
		s, err := core.Services("restart").Get(ctx, "r", metav1.GetOptions{})
		if err == nil {
			s.Spec.Ports[0].Port = int32(1000 + gen)
			_, err = core.Services("restart").Update(ctx, s, metav1.UpdateOptions{})
		}
		return err
	})
	change("a network policy labelled", func() error {
		np, err := e.admin.NetworkingV1().NetworkPolicies("restart").Get(ctx, "r", metav1.GetOptions{})
		if err == nil {
			np.Labels = map[string]string{"gen": label}
			_, err = e.admin.NetworkingV1().NetworkPolicies("restart").Update(ctx, np, metav1.UpdateOptions{})
		}
		return err
	})
	e.waitReal(t)
	return time.Since(ready)
}

// TestKubeAPIServerRestart restarts the API server under a running
// reflector, gracefully and by killing it, and measures the time from the
// restarted server's /readyz to a change reaching etcd: the informers'
// list-watch retries within Config.APIRetryMaxBackoff (1 s) while the
// server does not answer, or answers 401/403 before its RBAC is loaded,
// instead of letting client-go back off (25 to 50 s). Nothing is lost and
// no key of a present object is ever deleted.
func TestKubeAPIServerRestart(t *testing.T) {
	e := newRealEnv(t)
	rw := watchPrefix(t, e.cli)
	logs := &logBuffer{}
	r := e.reflector(t, e.cli, reflector.Config{Logger: logs.logger()})
	run(t, r)
	waitLeader(t, r)
	ctx := context.Background()
	_, err := e.admin.CoreV1().Nodes().Create(ctx, realNode("restart-n1", "192.168.3.1", "10.1.4.0/24"), metav1.CreateOptions{})
	require.NoError(t, err)
	createNamespace(t, e.admin, "restart", nil)
	for i := range 5 {
		createPod(t, e.admin, realPod("restart", fmt.Sprint("p", i), "restart-n1", map[string]string{"app": "r"}), fmt.Sprint("10.1.4.", 2+i), true)
	}
	_, err = e.admin.CoreV1().Services("restart").Create(ctx, realService("restart", "r", map[string]string{"app": "r"}), metav1.CreateOptions{})
	require.NoError(t, err)
	np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "restart", Name: "r"},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "r"}}}}
	_, err = e.admin.NetworkingV1().NetworkPolicies("restart").Create(ctx, np, metav1.CreateOptions{})
	require.NoError(t, err)
	e.waitReal(t)
	var lags []string
	for i, kill := range []bool{false, true, false, true, false} {
		lag := restartLag(t, e, kill, i)
		lags = append(lags, fmt.Sprintf("%.1fs", lag.Seconds()))
		t.Logf("restart %d (kill %v): changes of every resource in etcd %.2fs after /readyz", i, kill, lag.Seconds())
		assert.Less(t, lag, 10*time.Second, "changes flow again after a restart")
	}
	t.Logf("restart to flowing: %s", strings.Join(lags, ", "))
	want := wantState(t, e.admin)
	waitState(t, e.cli, want)
	rw.stop()
	assert.Empty(t, deletesOfPresent(rw.all(), want), "keys of present objects deleted")
	s := r.Stats()
	assert.EqualValues(t, 1, s.Elections)
	var apiErrors uint64
	for _, rs := range s.Resources {
		apiErrors += rs.APIErrors
	}
	assert.NotZero(t, apiErrors, "the informers saw the API server go")
	t.Logf("list/watch errors retried: %d; relists: pods %d", apiErrors, s.Resources[kubemodel.PodResource].Relists)

	for i := range 5 {
		forceDelete(t, e.admin, "restart", fmt.Sprint("p", i))
	}
	require.NoError(t, e.admin.CoreV1().Namespaces().Delete(ctx, "restart", metav1.DeleteOptions{}))
	require.NoError(t, e.admin.CoreV1().Nodes().Delete(ctx, "restart-n1", metav1.DeleteOptions{}))
}

// compact compacts the API server's etcd at its current revision.
func compact(t *testing.T) {
	t.Helper()
	cli, err := apiEtcd.Client()
	require.NoError(t, err)
	defer cli.Close()
	rev := revision(t, cli)
	_, err = cli.Compact(context.Background(), rev, clientv3.WithCompactPhysical())
	require.NoError(t, err)
}

// TestKubeWatchExpired cuts the reflector off the API server (a proxy
// between them), changes objects meanwhile, compacts the API server's
// etcd and restarts the API server, whose new watch cache starts after
// the compaction: the reflector's watches resume from resource versions
// that are gone, get "too old resource version" (410), and its informers
// re-list; the reflector reconciles, and ends equal to the API server
// with no key of a present object deleted on the way.
func TestKubeWatchExpired(t *testing.T) {
	e := newRealEnv(t)
	proxy, err := etcdtest.NewProxy(strings.TrimPrefix(e.c.URL(), "https://"))
	require.NoError(t, err)
	t.Cleanup(func() { proxy.Close() })
	e.refl.Host = "https://" + proxy.Addr()
	ctx := context.Background()
	createNamespace(t, e.admin, "expired", nil)
	_, err = e.admin.CoreV1().Nodes().Create(ctx, realNode("expired-n1", "192.168.4.1", "10.1.5.0/24"), metav1.CreateOptions{})
	require.NoError(t, err)
	for i := range 10 {
		createPod(t, e.admin, realPod("expired", fmt.Sprint("p", i), "expired-n1", map[string]string{"app": "x"}), fmt.Sprint("10.1.5.", 2+i), true)
	}
	rw := watchPrefix(t, e.cli)
	r := e.reflector(t, e.cli, reflector.Config{})
	run(t, r)
	waitLeader(t, r)
	e.waitReal(t)
	relists := r.Stats().Resources[kubemodel.PodResource].Relists

	proxy.Disconnect()
	for i := range 5 {
		forceDelete(t, e.admin, "expired", fmt.Sprint("p", i))
	}
	for i := 10; i < 15; i++ {
		createPod(t, e.admin, realPod("expired", fmt.Sprint("p", i), "expired-n1", map[string]string{"app": "x"}), fmt.Sprint("10.1.5.", 2+i), true)
	}
	p, err := e.admin.CoreV1().Pods("expired").Get(ctx, "p7", metav1.GetOptions{})
	require.NoError(t, err)
	p.Labels["moved"] = "yes"
	_, err = e.admin.CoreV1().Pods("expired").Update(ctx, p, metav1.UpdateOptions{})
	require.NoError(t, err)
	compact(t)
	require.NoError(t, e.c.RestartAPIServer(ctx))
	proxy.Reconnect()

	e.waitReal(t)
	eventually(t, "the pods' informer re-listed", func() bool {
		return r.Stats().Resources[kubemodel.PodResource].Relists > relists
	})
	want := wantState(t, e.admin)
	waitState(t, e.cli, want)
	rw.stop()
	assert.Empty(t, deletesOfPresent(rw.all(), want), "keys of present objects deleted")

	for i := 5; i < 15; i++ {
		forceDelete(t, e.admin, "expired", fmt.Sprint("p", i))
	}
	require.NoError(t, e.admin.CoreV1().Namespaces().Delete(ctx, "expired", metav1.DeleteOptions{}))
	require.NoError(t, e.admin.CoreV1().Nodes().Delete(ctx, "expired-n1", metav1.DeleteOptions{}))
}

// TestKubeAgentEtcdOutage stops the agents' etcd under a running
// reflector while objects are created, changed and deleted in the API
// server; once etcd is back, the reflector reconciles and etcd equals the
// API server, with no key of a present object deleted on the way.
func TestKubeAgentEtcdOutage(t *testing.T) {
	e := newRealEnv(t)
	ctx := context.Background()
	createNamespace(t, e.admin, "outage", nil)
	_, err := e.admin.CoreV1().Nodes().Create(ctx, realNode("outage-n1", "192.168.5.1", "10.1.6.0/24"), metav1.CreateOptions{})
	require.NoError(t, err)
	for i := range 6 {
		createPod(t, e.admin, realPod("outage", fmt.Sprint("p", i), "outage-n1", map[string]string{"app": "o"}), fmt.Sprint("10.1.6.", 2+i), true)
	}
	_, err = e.admin.CoreV1().Services("outage").Create(ctx, realService("outage", "o", map[string]string{"app": "o"}), metav1.CreateOptions{})
	require.NoError(t, err)
	rw := watchPrefix(t, e.cli)
	r := e.reflector(t, e.cli, reflector.Config{WriteTimeout: time.Second, RetryMaxBackoff: 500 * time.Millisecond})
	run(t, r)
	waitLeader(t, r)
	e.waitReal(t)

	e.etcd.Stop()
	for i := range 3 {
		forceDelete(t, e.admin, "outage", fmt.Sprint("p", i))
	}
	for i := 6; i < 9; i++ {
		createPod(t, e.admin, realPod("outage", fmt.Sprint("p", i), "outage-n1", map[string]string{"app": "o"}), fmt.Sprint("10.1.6.", 2+i), true)
	}
	svc, err := e.admin.CoreV1().Services("outage").Get(ctx, "o", metav1.GetOptions{})
	require.NoError(t, err)
	svc.Spec.Ports[0].Port = 81
	_, err = e.admin.CoreV1().Services("outage").Update(ctx, svc, metav1.UpdateOptions{})
	require.NoError(t, err)
	eventually(t, "a failed write", func() bool { return r.Stats().WriteErrors > 0 || !r.Stats().Leader })
	require.NoError(t, e.etcd.Restart())

	e.waitReal(t)
	want := wantState(t, e.admin)
	waitState(t, e.cli, want)
	rw.stop()
	assert.Empty(t, deletesOfPresent(rw.all(), want), "keys of present objects deleted")

	for i := 3; i < 9; i++ {
		forceDelete(t, e.admin, "outage", fmt.Sprint("p", i))
	}
	require.NoError(t, e.admin.CoreV1().Namespaces().Delete(ctx, "outage", metav1.DeleteOptions{}))
	require.NoError(t, e.admin.CoreV1().Nodes().Delete(ctx, "outage-n1", metav1.DeleteOptions{}))
}

// TestKubeTwoReplicasThroughRestart runs two replicas (leader election
// through the agents' etcd) across an API server restart: one leads
// throughout (never two), both keep warm caches, the changes made after
// the restart arrive; then the leader stops and the other takes over and
// reconciles.
func TestKubeTwoReplicasThroughRestart(t *testing.T) {
	e := newRealEnv(t)
	ctx := context.Background()
	createNamespace(t, e.admin, "replicas", nil)
	_, err := e.admin.CoreV1().Nodes().Create(ctx, realNode("replicas-n1", "192.168.6.1", "10.1.7.0/24"), metav1.CreateOptions{})
	require.NoError(t, err)
	createPod(t, e.admin, realPod("replicas", "p0", "replicas-n1", map[string]string{"app": "r"}), "10.1.7.2", true)
	rw := watchPrefix(t, e.cli)
	r1 := e.reflector(t, newClient(t, e.etcd), reflector.Config{Identity: "one"})
	r2 := e.reflector(t, newClient(t, e.etcd), reflector.Config{Identity: "two"})
	stops := []func(){run(t, r1), run(t, r2)}
	rs := []*reflector.Reflector{r1, r2}
	l := leaderOf(t, rs...)
	e.waitReal(t)

	require.NoError(t, e.c.RestartAPIServer(ctx))
	createPod(t, e.admin, realPod("replicas", "p1", "replicas-n1", map[string]string{"app": "r"}), "10.1.7.3", true)
	e.waitReal(t)
	assert.Equal(t, l, leaderOf(t, rs...), "the leader kept leading")
	assert.EqualValues(t, 1, rs[l].Stats().Elections)
	assert.Zero(t, rs[1-l].Stats().Elections)

	stops[l]()
	leaderOf(t, rs[1-l])
	assert.EqualValues(t, 1, rs[1-l].Stats().Elections, "the other replica took over")
	createPod(t, e.admin, realPod("replicas", "p2", "replicas-n1", map[string]string{"app": "r"}), "10.1.7.4", true)
	e.waitReal(t)
	want := wantState(t, e.admin)
	rw.stop()
	assert.Empty(t, deletesOfPresent(rw.all(), want), "keys of present objects deleted")

	for _, name := range []string{"p0", "p1", "p2"} {
		forceDelete(t, e.admin, "replicas", name)
	}
	require.NoError(t, e.admin.CoreV1().Namespaces().Delete(ctx, "replicas", metav1.DeleteOptions{}))
	require.NoError(t, e.admin.CoreV1().Nodes().Delete(ctx, "replicas-n1", metav1.DeleteOptions{}))
}
