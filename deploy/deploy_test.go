package deploy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/yaml"

	"github.com/vswitchkit/vswitchkit/bgp/bgpmodel"
	"github.com/vswitchkit/vswitchkit/bgp/bgpreflector"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/deploy"
	"github.com/vswitchkit/vswitchkit/embedetcd/etcdtest"
	"github.com/vswitchkit/vswitchkit/internal/kubetest"
	"github.com/vswitchkit/vswitchkit/reflector"
)

func TestMain(m *testing.M) {
	code := m.Run()
	kubeCluster.Stop()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: errors on successful test run: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// kubeCluster is the package's real API server (the manifests need no
// controller manager to be applied).
var kubeCluster = &kubetest.Shared{Etcd: func(dir string) ([]string, func(), error) {
	srv, err := etcdtest.Start(dir)
	if err != nil {
		return nil, nil, err
	}
	return []string{"http://" + srv.Endpoint()}, srv.Close, nil
}}

func manifests(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for _, f := range deploy.Order {
		b, err := fs.ReadFile(deploy.Files, f)
		require.NoError(t, err)
		objs, err := kubetest.DecodeYAML(b)
		require.NoError(t, err, f)
		out = append(out, objs...)
	}
	return out
}

func find(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	i := slices.IndexFunc(objs, func(o *unstructured.Unstructured) bool { return o.GetKind() == kind && o.GetName() == name })
	require.GreaterOrEqual(t, i, 0, "%s %s", kind, name)
	return objs[i]
}

// TestCRDsUpToDate: crds.yaml holds every CRD of the repository as it is
// now (run `go generate ./deploy` after changing one).
func TestCRDsUpToDate(t *testing.T) {
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	want, err := deploy.GenerateCRDs(root)
	require.NoError(t, err)
	got, err := os.ReadFile(deploy.CRDsFile)
	require.NoError(t, err)
	assert.Equal(t, string(want), string(got), "deploy/crds.yaml is stale: run go generate ./deploy")
}

// TestConflistIsTheExample: the network configuration the DaemonSet
// installs is the CNI plugin's example, examples/vswitchkit-cni.
func TestConflistIsTheExample(t *testing.T) {
	cm := find(t, manifests(t), "ConfigMap", "vswitchkit")
	got, _, _ := unstructured.NestedString(cm.Object, "data", "10-vswitchkit.conflist")
	want, err := os.ReadFile(filepath.Join("..", "examples", "vswitchkit-cni", "10-vswitchkit.conflist"))
	require.NoError(t, err)
	var g, w any
	require.NoError(t, json.Unmarshal([]byte(got), &g))
	require.NoError(t, json.Unmarshal(want, &w))
	assert.Equal(t, w, g)
}

// reflectorRole is the ClusterRole of deploy/reflector.yaml.
func reflectorRole(t *testing.T) *rbacv1.ClusterRole {
	t.Helper()
	u := find(t, manifests(t), "ClusterRole", "vswitchkit-reflector")
	role := &rbacv1.ClusterRole{}
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, role))
	return role
}

// TestReflectorRBACIsTheExample: the ClusterRole in examples/reflector's
// README is the one deployed.
func TestReflectorRBACIsTheExample(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "examples", "reflector", "README.md"))
	require.NoError(t, err)
	m := regexp.MustCompile("(?s)```yaml\n(apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\n.*?)```").FindSubmatch(b)
	require.NotNil(t, m, "no ClusterRole in examples/reflector/README.md")
	readme := &rbacv1.ClusterRole{}
	require.NoError(t, yaml.Unmarshal(m[1], readme))
	assert.Equal(t, reflectorRole(t).Rules, readme.Rules)
}

// TestKubeManifestsApply applies the manifests to a real API server the
// way the install guide does (README.md): a server-side dry run first
// (validation, defaulting, admission and authorization; nothing stored),
// then for real, with kubectl when it is installed and through client-go's
// server-side apply otherwise. Then the RBAC is what the components need:
// the reflector's account may list and watch what it reflects and do
// nothing else; the daemon's account may do nothing.
func TestKubeManifestsApply(t *testing.T) {
	c := kubeCluster.Get(t)
	ctx := context.Background()
	objs := manifests(t)
	_, err := kubetest.Apply(ctx, c.AdminConfig(), objs, kubetest.ApplyOptions{DryRun: true})
	require.NoError(t, err, "server-side dry run")
	kube := c.Admin()
	_, err = kube.AppsV1().DaemonSets("kube-system").Get(ctx, "vswitchkit-vswitch", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "a dry run stores nothing: %v", err)

	if kubectl, err := exec.LookPath("kubectl"); err == nil {
		for _, dryRun := range []string{"--dry-run=server", ""} {
			args := []string{"--kubeconfig", c.AdminKubeconfig(), "apply", "--server-side"}
			if dryRun != "" {
				args = append(args, dryRun)
			}
			for _, f := range deploy.Order {
				args = append(args, "-f", f)
			}
			out, err := exec.CommandContext(ctx, kubectl, args...).CombinedOutput()
			require.NoError(t, err, "kubectl %s:\n%s", strings.Join(args, " "), out)
			t.Logf("kubectl apply --server-side %s:\n%s", dryRun, out)
		}
	} else {
		t.Log("no kubectl: applied through client-go only")
	}
	applied, err := kubetest.Apply(ctx, c.AdminConfig(), objs, kubetest.ApplyOptions{})
	require.NoError(t, err)
	require.Len(t, applied, len(objs))
	ds, err := kube.AppsV1().DaemonSets("kube-system").Get(ctx, "vswitchkit-vswitch", metav1.GetOptions{})
	require.NoError(t, err)
	assert.True(t, *ds.Spec.Template.Spec.Containers[0].SecurityContext.Privileged)
	assert.True(t, ds.Spec.Template.Spec.HostNetwork)
	dep, err := kube.AppsV1().Deployments("kube-system").Get(ctx, "vswitchkit-reflector", metav1.GetOptions{})
	require.NoError(t, err)
	assert.EqualValues(t, 2, *dep.Spec.Replicas)
	require.NoError(t, kubetest.InstallCRDs(ctx, c.AdminConfig(), deploy.CRDsFile), "the CRDs are established")

	can := func(sa, group, resource, verb string) bool {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:               "system:serviceaccount:kube-system:" + sa,
			Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Group: group, Resource: resource, Verb: verb},
		}}
		got, err := kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
		require.NoError(t, err)
		return got.Status.Allowed
	}
	for _, rule := range reflectorRole(t).Rules {
		for _, res := range rule.Resources {
			for _, verb := range []string{"list", "watch"} {
				assert.True(t, can("vswitchkit-reflector", rule.APIGroups[0], res, verb), "reflector %s %s", verb, res)
				assert.False(t, can("vswitchkit-vswitch", rule.APIGroups[0], res, verb), "daemon %s %s", verb, res)
			}
			for _, verb := range []string{"get", "create", "update", "patch", "delete"} {
				assert.False(t, can("vswitchkit-reflector", rule.APIGroups[0], res, verb), "reflector %s %s", verb, res)
			}
		}
	}
}

// noWatchList makes the informers list and then watch, as they do when the
// API server refuses a watch-list (an etcd older than 3.5, or the
// WatchList feature off).
type noWatchList struct{ cache.ListerWatcher }

func (noWatchList) IsWatchListSemanticsUnSupported() bool { return true }

// startReflector runs the reflector of every resource (the built-in ones
// and the BGP peering policies) with cfg's identity, in list-and-watch
// mode with listWatch, and returns it with its stop function.
func startReflector(t *testing.T, cli *clientv3.Client, kube kubernetes.Interface, dyn dynamic.Interface, listWatch bool) (*reflector.Reflector, func()) {
	t.Helper()
	res := append(reflector.KubernetesResources(kube), bgpreflector.Resource(dyn))
	if listWatch {
		for i := range res {
			if res[i].ListWatch != nil {
				res[i].ListWatch = noWatchList{res[i].ListWatch}
			}
		}
	}
	r, err := reflector.New(cli, res, reflector.Config{SessionTTL: 2 * time.Second})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = r.Run(ctx) })
	return r, func() { cancel(); wg.Wait() }
}

// TestKubeReflectorRBACIsExactlyEnough runs the reflector of every
// resource through the service account of deploy/reflector.yaml: with the
// ClusterRole as deployed it syncs every informer, leads and writes, and
// no request is refused; with any one verb of one resource taken away,
// that resource's requests are refused (403) and its informer never
// syncs, so the reflector never starts writing. "list" is only needed
// where the informers cannot use a watch-list (they then list, then
// watch): against this API server and etcd they watch-list, which needs
// "watch" alone; the test takes "list" away in list-and-watch mode.
func TestKubeReflectorRBACIsExactlyEnough(t *testing.T) {
	c := kubeCluster.Get(t)
	ctx := context.Background()
	objs := manifests(t)
	require.NoError(t, kubetest.InstallCRDs(ctx, c.AdminConfig(), deploy.CRDsFile))
	rbac := slices.DeleteFunc(slices.Clone(objs), func(o *unstructured.Unstructured) bool {
		return o.GetKind() != "ServiceAccount" && o.GetKind() != "ClusterRole" && o.GetKind() != "ClusterRoleBinding"
	})
	_, err := kubetest.Apply(ctx, c.AdminConfig(), rbac, kubetest.ApplyOptions{})
	require.NoError(t, err)
	saCfg, err := c.ServiceAccountConfig(ctx, "kube-system", "vswitchkit-reflector")
	require.NoError(t, err)
	kube, err := kubernetes.NewForConfig(saCfg)
	require.NoError(t, err)
	dyn, err := dynamic.NewForConfig(saCfg)
	require.NoError(t, err)
	admin := c.Admin()
	full := reflectorRole(t)
	setRole := func(rules []rbacv1.PolicyRule) {
		role, err := admin.RbacV1().ClusterRoles().Get(ctx, full.Name, metav1.GetOptions{})
		require.NoError(t, err)
		role.Rules = rules
		_, err = admin.RbacV1().ClusterRoles().Update(ctx, role, metav1.UpdateOptions{})
		require.NoError(t, err)
	}
	t.Cleanup(func() { setRole(full.Rules) })
	// The reflector resources each Kubernetes resource feeds.
	fed := map[string][]string{
		"pods": {kubemodel.PodResource, kubemodel.PodPeerResource}, "services": {kubemodel.ServiceResource},
		"nodes": {kubemodel.NodeResource}, "namespaces": {kubemodel.NamespaceResource},
		"endpointslices": {kubemodel.EndpointsResource}, "networkpolicies": {kubemodel.NetworkPolicyResource},
		"bgppeeringpolicies": {bgpmodel.PolicyResourceName},
	}

	t.Run("complete", func(t *testing.T) {
		for _, listWatch := range []bool{false, true} {
			srv := newEtcd(t)
			r, stop := startReflector(t, srv, kube, dyn, listWatch)
			require.Eventually(t, func() bool { s := r.Stats(); return s.Leader && s.Reconciles > 0 }, time.Minute, 10*time.Millisecond, "list-and-watch %v", listWatch)
			stop()
			for name, rs := range r.Stats().Resources {
				assert.Zero(t, rs.APIErrors, "%s (list-and-watch %v): %s", name, listWatch, rs.LastAPIError)
			}
		}
	})
	for ri, rule := range full.Rules {
		for _, res := range rule.Resources {
			require.Contains(t, fed, res, "a resource the test does not know")
			for _, verb := range rule.Verbs {
				t.Run(verb+" "+res, func(t *testing.T) {
					rules := slices.Clone(full.Rules)
					rest := slices.DeleteFunc(slices.Clone(rule.Resources), func(s string) bool { return s == res })
					verbs := slices.DeleteFunc(slices.Clone(rule.Verbs), func(s string) bool { return s == verb })
					rules[ri].Resources = rest
					rules = append(rules, rbacv1.PolicyRule{APIGroups: rule.APIGroups, Resources: []string{res}, Verbs: verbs})
					rules = slices.DeleteFunc(rules, func(r rbacv1.PolicyRule) bool { return len(r.Resources) == 0 || len(r.Verbs) == 0 })
					setRole(rules)
					t.Cleanup(func() { setRole(full.Rules) })
					srv := newEtcd(t)
					r, stop := startReflector(t, srv, kube, dyn, verb == "list")
					defer stop()
					require.Eventually(t, func() bool {
						return strings.Contains(r.Stats().Resources[fed[res][0]].LastAPIError, "forbidden")
					}, time.Minute, 10*time.Millisecond, "no 403 for %s %s", verb, res)
					s := r.Stats()
					assert.False(t, s.Leader || s.Reconciles > 0, "the reflector wrote without %s %s", verb, res)
					t.Logf("%s: %s", fed[res][0], s.Resources[fed[res][0]].LastAPIError)
				})
			}
		}
	}
}

func newEtcd(t *testing.T) *clientv3.Client {
	t.Helper()
	srv, err := etcdtest.Start(t.TempDir())
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	cli, err := srv.Client()
	require.NoError(t, err)
	t.Cleanup(func() { cli.Close() })
	return cli
}
