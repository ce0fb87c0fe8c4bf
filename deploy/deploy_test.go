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
	"google.golang.org/protobuf/proto"
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

// reflectorSecretRole is the Role of deploy/reflector.yaml: the BGP auth
// secrets.
func reflectorSecretRole(t *testing.T) *rbacv1.Role {
	t.Helper()
	u := find(t, manifests(t), "Role", "vswitchkit-reflector")
	role := &rbacv1.Role{}
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, role))
	return role
}

// verbs are the verbs the RBAC tests ask about.
var verbs = []string{"get", "list", "watch", "create", "update", "patch", "delete"}

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
	ns, rest := objs[:1], objs[1:]
	require.Equal(t, "Namespace", ns[0].GetKind(), deploy.NamespaceFile)
	_, err := kubetest.Apply(ctx, c.AdminConfig(), ns, kubetest.ApplyOptions{})
	require.NoError(t, err, deploy.NamespaceFile)
	_, err = kubetest.Apply(ctx, c.AdminConfig(), rest, kubetest.ApplyOptions{DryRun: true})
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
				if f != deploy.NamespaceFile || dryRun == "" {
					args = append(args, "-f", f)
				}
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

	can := func(sa, ns, group, resource, verb string) bool {
		res, sub, _ := strings.Cut(resource, "/")
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:   "system:serviceaccount:kube-system:" + sa,
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: ns, Group: group, Resource: res, Subresource: sub, Verb: verb,
			},
		}}
		got, err := kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
		require.NoError(t, err)
		return got.Status.Allowed
	}
	for _, rule := range reflectorRole(t).Rules {
		for _, res := range rule.Resources {
			for _, verb := range verbs {
				assert.Equal(t, slices.Contains(rule.Verbs, verb), can("vswitchkit-reflector", "", rule.APIGroups[0], res, verb), "reflector %s %s", verb, res)
				assert.False(t, can("vswitchkit-vswitch", "", rule.APIGroups[0], res, verb), "daemon %s %s", verb, res)
			}
		}
	}
	// The Secrets of the BGP secrets namespace alone.
	for _, verb := range verbs {
		want := verb == "list" || verb == "watch"
		assert.Equal(t, want, can("vswitchkit-reflector", bgpreflector.DefaultSecretNamespace, "", "secrets", verb), "reflector %s secrets", verb)
		assert.False(t, can("vswitchkit-reflector", "kube-system", "", "secrets", verb), "reflector %s secrets of kube-system", verb)
		assert.False(t, can("vswitchkit-vswitch", bgpreflector.DefaultSecretNamespace, "", "secrets", verb), "daemon %s secrets", verb)
	}
}

// noWatchList makes the informers list and then watch, as they do when the
// API server refuses a watch-list (an etcd older than 3.5, or the
// WatchList feature off).
type noWatchList struct{ cache.ListerWatcher }

func (noWatchList) IsWatchListSemanticsUnSupported() bool { return true }

// startReflector runs the reflector of every resource (the built-in ones,
// the BGP peering policies and the v2 BGP objects with their auth secrets) with cfg's identity, in list-and-watch
// mode with listWatch, and returns it with its stop function.
func startReflector(t *testing.T, cli *clientv3.Client, kube kubernetes.Interface, dyn dynamic.Interface, listWatch bool) (*reflector.Reflector, func()) {
	t.Helper()
	res := append(reflector.KubernetesResources(kube), bgpreflector.Resource(dyn))
	res = append(res, bgpreflector.V2Resources(dyn, kube, bgpreflector.V2Config{})...)
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
// ClusterRole and Role as deployed it syncs every informer, leads and
// writes, and no request is refused; with any one verb of one resource
// taken away, that resource's requests are refused (403) and its informer
// never syncs, so the reflector never starts writing. "list" is only
// needed where the informers cannot use a watch-list (they then list,
// then watch): against this API server and etcd they watch-list, which
// needs "watch" alone; the test takes "list" away in list-and-watch mode.
// The BGP status writer beside it creates, updates the status of and
// deletes a node's BGPNodeStatus, and fails without any one of its verbs.
func TestKubeReflectorRBACIsExactlyEnough(t *testing.T) {
	c := kubeCluster.Get(t)
	ctx := context.Background()
	objs := manifests(t)
	require.NoError(t, kubetest.InstallCRDs(ctx, c.AdminConfig(), deploy.CRDsFile))
	rbac := slices.DeleteFunc(slices.Clone(objs), func(o *unstructured.Unstructured) bool {
		switch o.GetKind() {
		case "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Namespace", "Role", "RoleBinding":
			return false
		}
		return true
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
	full, fullSecrets := reflectorRole(t), reflectorSecretRole(t)
	// setRoles sets the rules of the ClusterRole and of the Role.
	setRoles := func(rules, secretRules []rbacv1.PolicyRule) {
		role, err := admin.RbacV1().ClusterRoles().Get(ctx, full.Name, metav1.GetOptions{})
		require.NoError(t, err)
		role.Rules = rules
		_, err = admin.RbacV1().ClusterRoles().Update(ctx, role, metav1.UpdateOptions{})
		require.NoError(t, err)
		srole, err := admin.RbacV1().Roles(fullSecrets.Namespace).Get(ctx, fullSecrets.Name, metav1.GetOptions{})
		require.NoError(t, err)
		srole.Rules = secretRules
		_, err = admin.RbacV1().Roles(fullSecrets.Namespace).Update(ctx, srole, metav1.UpdateOptions{})
		require.NoError(t, err)
	}
	t.Cleanup(func() { setRoles(full.Rules, fullSecrets.Rules) })
	// without returns rules without verb on res.
	without := func(rules []rbacv1.PolicyRule, ri int, res, verb string) []rbacv1.PolicyRule {
		rule := rules[ri]
		rules = slices.Clone(rules)
		rest := slices.DeleteFunc(slices.Clone(rule.Resources), func(s string) bool { return s == res })
		vs := slices.DeleteFunc(slices.Clone(rule.Verbs), func(s string) bool { return s == verb })
		rules[ri].Resources = rest
		rules = append(rules, rbacv1.PolicyRule{APIGroups: rule.APIGroups, Resources: []string{res}, Verbs: vs})
		return slices.DeleteFunc(rules, func(r rbacv1.PolicyRule) bool { return len(r.Resources) == 0 || len(r.Verbs) == 0 })
	}
	// The reflector resources each Kubernetes resource feeds; the BGP
	// status objects are written by the status writer.
	fed := map[string][]string{
		"pods": {kubemodel.PodResource, kubemodel.PodPeerResource}, "services": {kubemodel.ServiceResource},
		"nodes": {kubemodel.NodeResource}, "namespaces": {kubemodel.NamespaceResource},
		"endpointslices": {kubemodel.EndpointsResource}, "networkpolicies": {kubemodel.NetworkPolicyResource},
		"bgppeeringpolicies": {bgpmodel.PolicyResourceName},
		"bgpclusterconfigs":  {bgpmodel.ClusterConfigResourceName}, "bgppeerconfigs": {bgpmodel.PeerConfigResourceName},
		"bgpadvertisements":      {bgpmodel.AdvertisementResourceName},
		"bgpnodeconfigoverrides": {bgpmodel.NodeConfigOverrideResourceName},
		"secrets":                {bgpmodel.AuthSecretResourceName},
	}
	statusWriter := func(t *testing.T, cli *clientv3.Client, r *reflector.Reflector) (*bgpreflector.StatusWriter, func()) {
		w, err := bgpreflector.NewStatusWriter(cli, dyn, func() bool { return r.Stats().Leader },
			bgpreflector.StatusWriterConfig{MinInterval: -1, MaxWritesPerSecond: -1})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Go(func() { _ = w.Run(ctx) })
		return w, func() { cancel(); wg.Wait() }
	}
	adminDyn, err := dynamic.NewForConfig(c.AdminConfig())
	require.NoError(t, err)
	nodeStatuses := adminDyn.Resource(bgpreflector.GroupVersionResourceV2(bgpreflector.PluralNodeStatus))
	putStatus := func(t *testing.T, cli *clientv3.Client, node string) {
		b, err := proto.Marshal(&bgpmodel.NodeStatus{Node: node, Source: "BGPClusterConfig/cc"})
		require.NoError(t, err)
		_, err = cli.Put(ctx, bgpmodel.StatusKey("", node), string(b))
		require.NoError(t, err)
	}

	t.Run("complete", func(t *testing.T) {
		for _, listWatch := range []bool{false, true} {
			srv := newEtcd(t)
			r, stop := startReflector(t, srv, kube, dyn, listWatch)
			require.Eventually(t, func() bool { s := r.Stats(); return s.Leader && s.Reconciles > 0 }, time.Minute, 10*time.Millisecond, "list-and-watch %v", listWatch)
			if !listWatch {
				// The status writer: a node's object created with its
				// status, deleted when the status goes.
				w, stopW := statusWriter(t, srv, r)
				putStatus(t, srv, "node-rbac")
				require.Eventually(t, func() bool {
					o, err := nodeStatuses.Get(ctx, "node-rbac", metav1.GetOptions{})
					if err != nil {
						return false
					}
					src, _, _ := unstructured.NestedString(o.Object, "status", "source")
					return src == "BGPClusterConfig/cc"
				}, time.Minute, 10*time.Millisecond, "the status writer's object")
				_, err := srv.Delete(ctx, bgpmodel.StatusKey("", "node-rbac"))
				require.NoError(t, err)
				require.Eventually(t, func() bool {
					_, err := nodeStatuses.Get(ctx, "node-rbac", metav1.GetOptions{})
					return apierrors.IsNotFound(err)
				}, time.Minute, 10*time.Millisecond, "the status writer deletes the object")
				stopW()
				assert.Zero(t, w.Stats().Errors, "status writer errors")
			}
			stop()
			for name, rs := range r.Stats().Resources {
				assert.Zero(t, rs.APIErrors, "%s (list-and-watch %v): %s", name, listWatch, rs.LastAPIError)
			}
		}
	})
	type roleRule struct {
		secrets bool // of the Role, not the ClusterRole
		ri      int
		rule    rbacv1.PolicyRule
	}
	var all []roleRule
	for ri, rule := range full.Rules {
		all = append(all, roleRule{false, ri, rule})
	}
	for ri, rule := range fullSecrets.Rules {
		all = append(all, roleRule{true, ri, rule})
	}
	for _, rr := range all {
		for _, res := range rr.rule.Resources {
			for _, verb := range rr.rule.Verbs {
				t.Run(verb+" "+res, func(t *testing.T) {
					rules, secretRules := full.Rules, fullSecrets.Rules
					if rr.secrets {
						secretRules = without(secretRules, rr.ri, res, verb)
					} else {
						rules = without(rules, rr.ri, res, verb)
					}
					setRoles(rules, secretRules)
					t.Cleanup(func() { setRoles(full.Rules, fullSecrets.Rules) })
					srv := newEtcd(t)
					if strings.HasPrefix(res, bgpreflector.PluralNodeStatus) {
						// The status writer's verbs: get and create (a new
						// node's object), update of the status, delete.
						r, stop := startReflector(t, srv, kube, dyn, false)
						defer stop()
						w, stopW := statusWriter(t, srv, r)
						defer stopW()
						if verb == "delete" {
							_, err := nodeStatuses.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
								"apiVersion": bgpreflector.GroupV2 + "/" + bgpreflector.VersionV2, "kind": bgpreflector.KindNodeStatus,
								"metadata": map[string]any{"name": "node-rbac"},
							}}, metav1.CreateOptions{})
							require.NoError(t, err)
							putStatus(t, srv, "node-rbac")
							require.Eventually(t, func() bool { return w.Stats().Writes > 0 }, time.Minute, 10*time.Millisecond)
							_, err = srv.Delete(ctx, bgpmodel.StatusKey("", "node-rbac"))
							require.NoError(t, err)
						} else {
							putStatus(t, srv, "node-rbac")
						}
						t.Cleanup(func() { _ = nodeStatuses.Delete(ctx, "node-rbac", metav1.DeleteOptions{}) })
						require.Eventually(t, func() bool { return w.Stats().Errors > 0 }, time.Minute, 10*time.Millisecond, "no error without %s %s", verb, res)
						return
					}
					require.Contains(t, fed, res, "a resource the test does not know")
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
