package demo

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/vswitchkit/vswitchkit/agent"
	"github.com/vswitchkit/vswitchkit/bgp/bgpmodel"
	"github.com/vswitchkit/vswitchkit/bgp/bgpreflector"
	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/embedetcd"
	"github.com/vswitchkit/vswitchkit/nodesync"
	"github.com/vswitchkit/vswitchkit/nodesync/etcddb"
	"github.com/vswitchkit/vswitchkit/reflector"
)

// statePrefix is the root of every key the cluster writes to etcd.
const statePrefix = "/vswitchkit/"

// rrAddr is the route reflector's address.
var rrAddr = netip.AddrFrom4([4]byte{127, 0, 0, 1})

// Run runs the demo: it builds the cluster, waits until it has converged,
// writes the summary to out, makes the scripted change, waits again and
// writes what changed; with Options.RunFor it then keeps the cluster
// running. The result holds both summaries and the diff.
//
// Run stops everything it started, joins its goroutines and removes its
// temporary directories before it returns, whether it succeeded, failed
// or ctx ended (Ctrl-C). If ctx ends before the diff is written, Run
// returns ctx.Err(); during RunFor it returns the result and no error.
func Run(ctx context.Context, opts Options, out io.Writer) (*Result, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	start := time.Now()
	c := &cluster{opts: opts, log: opts.Logger, prog: newProgress(opts.Progress, opts.Live),
		pods: map[string]*pod{}, failed: make(chan struct{})}
	res, err := c.run(ctx, out, start)
	c.prog.flush()
	if serr := c.shutdown(); serr != nil && err == nil {
		err = serr
	}
	switch {
	case err != nil && ctx.Err() != nil:
		// Whatever was interrupted (a CNI request, a wait), the cause is
		// the end of ctx.
		return nil, ctx.Err()
	case err != nil:
		return nil, err
	}
	return res, nil
}

// cluster is the demo cluster. Its fields are owned by Run's goroutine,
// except pods (guarded by mu) and failure (closed once).
type cluster struct {
	opts Options
	log  *slog.Logger
	prog *progress
	dir  string // temporary directory: node state, the embedded etcd's data

	etcdSrv   *embedetcd.Server // nil with an external etcd
	etcd      *clientv3.Client
	endpoints []string
	ownKeys   bool // statePrefix was empty at the start: delete it at the end

	kube kubernetes.Interface // client-go's fake, or a real API server's client (Options.RealKube)
	dyn  dynamic.Interface

	rr    *routeReflector
	nodes []*simNode
	svcs  []*service

	mu    sync.Mutex
	pods  map[string]*pod // live pods by name
	nextG int             // number of the next pod

	wg         sync.WaitGroup // background components
	stops      []func() error // stop functions of the components but the nodes, in start order
	failed     chan struct{}  // closed on the first component failure
	failOnce   sync.Once
	failureErr error

	steps []Step // wall times of the steps so far
}

// step records the wall time of a step that started at start.
func (c *cluster) step(name string, start time.Time) {
	c.steps = append(c.steps, Step{Name: name, Duration: Duration(time.Since(start))})
}

func (c *cluster) run(ctx context.Context, out io.Writer, start time.Time) (*Result, error) {
	if err := c.setup(ctx); err != nil {
		return nil, err
	}
	res := &Result{Etcd: c.endpoints}
	var err error
	if res.Before, err = c.summary(ctx); err != nil {
		return nil, err
	}
	res.Timings.Setup = Duration(time.Since(start))
	c.prog.flush()
	if !c.opts.JSON {
		fmt.Fprintf(out, "vswitchkit demo cluster: %d nodes, %d pods, %d services; etcd %s; converged in %.2fs\n",
			len(res.Before.Nodes), c.podCount(), len(c.svcs), strings.Join(c.endpoints, ","), time.Since(start).Seconds())
		if err := res.Before.WriteText(out); err != nil {
			return nil, err
		}
		legend := NATLegend
		if c.opts.ServiceRenderer == agent.ServicesCnat {
			legend = CnatLegend
		}
		fmt.Fprintf(out, "\n%s\n", wrap(legend, 80))
	}

	changeStart := time.Now()
	if res.Changes, err = c.change(ctx); err != nil {
		return nil, err
	}
	if err := c.converge(ctx, " (after the change)"); err != nil {
		return nil, err
	}
	if res.After, err = c.summary(ctx); err != nil {
		return nil, err
	}
	res.Diff = diffSummaries(res.Before, res.After)
	res.Timings.Change = Duration(time.Since(changeStart))
	res.Timings.Total = Duration(time.Since(start))
	res.Timings.Steps = c.steps
	c.prog.flush()
	if c.opts.JSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(res); err != nil {
			return nil, err
		}
	} else {
		fmt.Fprintf(out, "\nScripted change (converged in %.2fs):\n", time.Since(changeStart).Seconds())
		for _, ch := range res.Changes {
			fmt.Fprintf(out, "  - %s\n", ch)
		}
		fmt.Fprintln(out, "\nWhat changed (- before, + after):")
		if err := writeDiff(out, res.Diff); err != nil {
			return nil, err
		}
		fmt.Fprintf(out, "\nDone in %.2fs.\n", time.Since(start).Seconds())
	}

	if c.opts.RunFor > 0 {
		c.prog.note("the cluster keeps running for %v (Ctrl-C stops it); etcd: %s", c.opts.RunFor, strings.Join(c.endpoints, ","))
		t := time.NewTimer(c.opts.RunFor)
		defer t.Stop()
		select {
		case <-ctx.Done():
		case <-t.C:
		case <-c.failed:
			return nil, c.err()
		}
	}
	return res, nil
}

// fail records the first failure of a component.
func (c *cluster) fail(err error) {
	c.failOnce.Do(func() {
		c.failureErr = err
		close(c.failed)
	})
}

// err returns the first failure of a component, nil if none.
func (c *cluster) err() error {
	select {
	case <-c.failed:
		return c.failureErr
	default:
		return nil
	}
}

// spawn runs a component on its own goroutine until its stop function is
// called or ctx ends. A component that returns on its own fails the
// cluster.
func (c *cluster) spawn(ctx context.Context, name string, run func(context.Context) error) func() error {
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		err := run(cctx)
		if cctx.Err() == nil {
			if err == nil {
				err = errors.New("stopped")
			}
			c.fail(fmt.Errorf("%s: %w", name, err))
		}
		done <- err
	}()
	var once sync.Once
	var result error
	stop := func() error {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
				result = fmt.Errorf("%s: %w", name, err)
			}
		})
		return result
	}
	return stop
}

// liveNodes returns the nodes that have not left.
func (c *cluster) liveNodes() []*simNode {
	return slices.DeleteFunc(slices.Clone(c.nodes), func(n *simNode) bool { return n.left })
}

func (c *cluster) podCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.pods)
}

// setup builds the cluster and waits until it has converged.
func (c *cluster) setup(ctx context.Context) error {
	var err error
	// Short: the pod servers' socket paths must fit sun_path.
	if c.dir, err = os.MkdirTemp("", "vskdemo-"); err != nil {
		return fmt.Errorf("demo: temporary directory: %w", err)
	}
	if err := c.startEtcd(ctx); err != nil {
		return err
	}

	// The simulated Kubernetes API (or a real one), the reflector writing
	// it into etcd.
	if c.opts.RealKube {
		if err := c.startRealKube(ctx); err != nil {
			return err
		}
	} else {
		c.kube = kubefake.NewClientset()
		listKinds := bgpreflector.ListKindsV2()
		listKinds[bgpreflector.GroupVersionResource()] = bgpreflector.ListKind
		c.dyn = dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds)
		if _, err := c.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	resources := append(reflector.KubernetesResources(c.kube), bgpreflector.Resource(c.dyn))
	resources = append(resources, bgpreflector.V2Resources(c.dyn, c.kube, bgpreflector.V2Config{})...)
	refl, err := reflector.New(c.etcd, resources, reflector.Config{Identity: "demo", Logger: c.log}) // it adds component=reflector
	if err != nil {
		return err
	}
	c.stops = append(c.stops, c.spawn(ctx, "reflector", refl.Run))

	// The nodes (agents opened, not running yet) and their Kubernetes
	// objects.
	for i := 1; i <= c.opts.Nodes; i++ {
		n, err := newSimNode(i, c.dir, c.etcd, agent.Deps{Logger: c.log}, c.opts)
		if err != nil {
			return err
		}
		c.nodes = append(c.nodes, n)
		if _, err := c.kube.CoreV1().Nodes().Create(ctx, nodeObject(n.name, i, n.internalIP), metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	for i := range c.opts.Services {
		s := newService(i)
		if c.opts.IPFamily == agent.DualStack {
			s.clusterIP6 = serviceIPv6(i)
		}
		c.svcs = append(c.svcs, s)
		if _, err := c.kube.CoreV1().Services(namespace).Create(ctx, serviceObject(s), metav1.CreateOptions{}); err != nil {
			return err
		}
		if err := c.setServiceStatus(ctx, s); err != nil {
			return err
		}
		if c.opts.RealKube {
			continue // the controller manager makes the slices
		}
		for _, es := range sliceObjects(s, nil) {
			if _, err := c.kube.DiscoveryV1().EndpointSlices(namespace).Create(ctx, es, metav1.CreateOptions{}); err != nil {
				return err
			}
		}
	}
	plurals := map[string]string{
		bgpreflector.KindClusterConfig: bgpreflector.PluralClusterConfig, bgpreflector.KindPeerConfig: bgpreflector.PluralPeerConfig,
		bgpreflector.KindAdvertisement: bgpreflector.PluralAdvertisement, bgpreflector.KindNodeConfigOverride: bgpreflector.PluralNodeConfigOverride,
	}
	for _, o := range bgpObjects(rrAddr, c.nodes) {
		if _, err := c.dyn.Resource(bgpreflector.GroupVersionResourceV2(plurals[o.GetKind()])).Create(ctx, o, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	if c.hasNetpol() {
		if _, err := c.kube.NetworkingV1().NetworkPolicies(namespace).Create(ctx, netpolObject(), metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	if err := c.await(ctx, "Kubernetes state in etcd", func(context.Context) (check, error) {
		st := refl.Stats()
		ch := check{total: 7}
		for _, r := range []struct {
			name string
			want int
		}{
			{kubemodel.NodeResource, len(c.nodes)}, {kubemodel.ServiceResource, len(c.svcs)},
			{bgpmodel.ClusterConfigResourceName, 1}, {bgpmodel.PeerConfigResourceName, 1}, {bgpmodel.AdvertisementResourceName, 2},
			{bgpmodel.NodeConfigOverrideResourceName, len(c.nodes)},
		} {
			if st.Resources[r.name].Objects >= r.want {
				ch.done++
			} else {
				ch.miss("%s: %d of %d reflected", r.name, st.Resources[r.name].Objects, r.want)
			}
		}
		if st.Leader {
			ch.done++
		} else {
			ch.miss("the reflector is not the leader yet")
		}
		return ch, nil
	}); err != nil {
		return err
	}

	// The route reflector starts before the nodes' speakers (see the
	// package documentation).
	if c.rr, err = startRouteReflector(ctx, rrAddr, c.log); err != nil {
		return err
	}
	if err := c.startNodes(ctx); err != nil {
		return err
	}
	if err := c.await(ctx, "node mesh (VXLAN tunnels)", c.checkMesh); err != nil {
		return err
	}
	if err := c.addPods(ctx); err != nil {
		return err
	}
	if err := c.await(ctx, "services ("+c.opts.ServiceRenderer+")", c.checkServices); err != nil {
		return err
	}
	if c.hasNetpol() {
		if err := c.await(ctx, "NetworkPolicy (ACLs on the selected pods)", c.checkPolicy); err != nil {
			return err
		}
	}
	if err := c.startBGP(ctx); err != nil {
		return err
	}
	return c.await(ctx, "routes at the route reflector", c.checkReflector)
}

// startNodes starts the nodes' agents one at a time, in node order, each
// once the previous one is ready (agent.WaitReady: its start-up resync
// processed, so it has its node ID): node-i claims node ID i, the same in
// every run. Started all at once they raced for the smallest free ID, and
// the IDs (and with them pod subnets and addresses) changed from run to
// run. A node's start-up takes milliseconds; the cost is that sum.
func (c *cluster) startNodes(ctx context.Context) error {
	const name = "nodes ready"
	st := c.prog.stage(name, len(c.nodes))
	defer st.abort()
	start := time.Now()
	wctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	for i, n := range c.nodes {
		n.stop = c.spawn(ctx, n.name, n.agent.Run)
		if err := n.agent.WaitReady(wctx); err != nil {
			if errors.Is(err, controller.ErrStopped) {
				// The agent failed: its Run returns the cause, which
				// spawn records.
				select {
				case <-c.failed:
					err = c.failureErr
				case <-ctx.Done():
				}
			}
			return fmt.Errorf("%s (%d/%d): %s: %w", name, i, len(c.nodes), n.name, err)
		}
		st.set(i+1, len(c.nodes))
	}
	st.finish()
	c.step(name, start)
	return nil
}

// startEtcd starts the embedded etcd or connects to the external one.
func (c *cluster) startEtcd(ctx context.Context) error {
	st := c.prog.stage("etcd", 1)
	defer st.abort()
	defer c.step("etcd", time.Now())
	if len(c.opts.Etcd) == 0 {
		srv, err := embedetcd.Start(ctx, embedetcd.Config{Dir: filepath.Join(c.dir, "etcd"), UnsafeNoFsync: true,
			Logger: c.log}) // it adds component=embedetcd
		if err != nil {
			return fmt.Errorf("demo: embedded etcd: %w", err)
		}
		c.etcdSrv = srv
		if c.etcd, err = srv.Client(); err != nil {
			return fmt.Errorf("demo: etcd client: %w", err)
		}
		c.endpoints = srv.Endpoints()
		c.ownKeys = true
		st.finish()
		return nil
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.opts.Etcd, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return fmt.Errorf("demo: etcd client for %v: %w", c.opts.Etcd, err)
	}
	c.etcd, c.endpoints = cli, c.opts.Etcd
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := cli.Get(cctx, statePrefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return fmt.Errorf("demo: etcd at %v: %w", c.opts.Etcd, err)
	}
	if resp.Count > 0 {
		return fmt.Errorf("demo: etcd at %v already has %d keys under %s (another cluster's state, or a run that was killed); use an empty etcd or delete them (etcdctl del --prefix %s)",
			c.opts.Etcd, resp.Count, statePrefix, statePrefix)
	}
	c.ownKeys = true
	st.finish()
	return nil
}

// newPod returns a new pod on node, numbered across the cluster, that
// backs the service svc(number) returns ("" for none), with a container ID
// and UID derived from its name and number.
func (c *cluster) newPod(node string, svc func(g int) string) *pod {
	c.mu.Lock()
	g := c.nextG
	c.nextG++
	c.mu.Unlock()
	service := svc(g)
	name := fmt.Sprintf("%s-%d", service, g)
	if service == "" {
		name = fmt.Sprintf("pod-%d", g)
	}
	sum := sha256.Sum256([]byte(name))
	return &pod{name: name, node: node, service: service,
		uid:         types.UID(fmt.Sprintf("10000000-0000-4000-8000-%012d", g)),
		containerID: hex.EncodeToString(sum[:])}
}

// podUp brings p up on n as the cluster would: the scheduled pod object,
// the sandbox's network through the pod server (the CNI plugin's ADD), and
// the pod's status with the address from the CNI result (kubelet).
func (c *cluster) podUp(ctx context.Context, n *simNode, p *pod) error {
	created, err := c.kube.CoreV1().Pods(namespace).Create(ctx, podObject(p), metav1.CreateOptions{})
	if err != nil {
		return err
	}
	p.uid = created.UID // a real API server gives the pod its own
	ip, ip6, err := n.addPod(ctx, p)
	if err != nil {
		return err
	}
	obj := podObject(p)
	p.ip, p.ip6 = ip, ip6
	obj.Status = runningStatus(p, n.internalIP)
	if _, err := c.kube.CoreV1().Pods(namespace).UpdateStatus(ctx, obj, metav1.UpdateOptions{}); err != nil {
		return err
	}
	c.mu.Lock()
	c.pods[p.name] = p
	c.mu.Unlock()
	return nil
}

// syncSlices updates the EndpointSlice of every service in svcs to its
// ready pods, as the endpoint-slice controller does (a real one does
// itself with a real API server).
func (c *cluster) syncSlices(ctx context.Context, svcs ...*service) error {
	if c.opts.RealKube {
		return nil
	}
	for _, s := range svcs {
		c.mu.Lock()
		var pods []*pod
		for _, p := range sortedPods(c.pods) {
			if p.service == s.name && p.ip.IsValid() {
				pods = append(pods, p)
			}
		}
		c.mu.Unlock()
		for _, es := range sliceObjects(s, pods) {
			if _, err := c.kube.DiscoveryV1().EndpointSlices(namespace).Update(ctx, es, metav1.UpdateOptions{}); err != nil {
				return fmt.Errorf("endpoint slice of %s: %w", s.name, err)
			}
		}
	}
	return nil
}

// addPods adds PodsPerNode pods to every node, nodes in parallel; pod g
// (numbered across the cluster) backs service g mod Services.
func (c *cluster) addPods(ctx context.Context) error {
	st := c.prog.stage("pods (CNI ADD via pod server)", len(c.nodes)*c.opts.PodsPerNode)
	defer st.abort()
	defer c.step("pods (CNI ADD via pod server)", time.Now())
	var plan [][]*pod
	for _, n := range c.nodes {
		var pods []*pod
		for range c.opts.PodsPerNode {
			pods = append(pods, c.newPod(n.name, func(g int) string { return c.svcs[g%len(c.svcs)].name }))
		}
		plan = append(plan, pods)
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		done int
		errs []error
	)
	for i, n := range c.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, p := range plan[i] {
				err := c.podUp(ctx, n, p)
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				} else {
					done++
				}
				st.set(done, len(c.nodes)*c.opts.PodsPerNode)
				mu.Unlock()
				if err != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if err := c.syncSlices(ctx, c.svcs...); err != nil {
		return err
	}
	st.finish()
	return nil
}

// startBGP lets the nodes join the BGP cluster config one at a time, each
// after the previous one applied it, then connects the route reflector to
// all of them (see the package documentation for why).
func (c *cluster) startBGP(ctx context.Context) error {
	st := c.prog.stage("BGP speakers (one at a time)", len(c.nodes))
	defer st.abort()
	defer c.step("BGP speakers (one at a time)", time.Now())
	for i, n := range c.nodes {
		if err := c.labelNode(ctx, n.name, bgpLabel, "enabled"); err != nil {
			return err
		}
		err := c.poll(ctx, 10*time.Millisecond, func() (bool, string, error) {
			s := n.agent.BGP.Controller.Status()
			if s.Policy == configName && s.LastError == nil {
				return true, "", nil
			}
			return false, fmt.Sprintf("%s has not applied the BGP cluster config (last error: %v)", n.name, s.LastError), nil
		})
		if err != nil {
			return fmt.Errorf("BGP speakers: %w", err)
		}
		st.set(i+1, len(c.nodes))
	}
	st.finish()
	for _, n := range c.nodes {
		if err := c.rr.addClient(ctx, n.name, n.bgpAddr, n.bgpPort); err != nil {
			return err
		}
	}
	return nil
}

// labelNode sets a label on a Kubernetes node.
func (c *cluster) labelNode(ctx context.Context, name, key, value string) error {
	obj, err := c.kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	obj = obj.DeepCopy()
	obj.Labels[key] = value
	_, err = c.kube.CoreV1().Nodes().Update(ctx, obj, metav1.UpdateOptions{})
	return err
}

// converge waits until the mesh, the services and the route reflector
// match the cluster.
func (c *cluster) converge(ctx context.Context, suffix string) error {
	if err := c.await(ctx, "node mesh"+suffix, c.checkMesh); err != nil {
		return err
	}
	if err := c.await(ctx, "services"+suffix, c.checkServices); err != nil {
		return err
	}
	return c.await(ctx, "route reflector"+suffix, c.checkReflector)
}

// change makes the scripted change and describes it: a pod deleted
// through the pod server, a backend added, a node leaving.
func (c *cluster) change(ctx context.Context) ([]string, error) {
	var changes []string
	live := c.liveNodes()
	first := live[0]
	c.prog.note("scripted change")

	// A pod deleted: the endpoint-slice controller drops the terminating
	// pod, the runtime tears its sandbox down (CNI DEL through the pod
	// server), the pod object goes.
	c.mu.Lock()
	var victim *pod
	for _, p := range sortedPods(c.pods) {
		if p.node == first.name {
			victim = p
			break
		}
	}
	if victim != nil {
		delete(c.pods, victim.name)
	}
	c.mu.Unlock()
	if victim != nil {
		start := time.Now()
		if err := c.syncSlices(ctx, c.service(victim.service)); err != nil {
			return nil, err
		}
		if err := first.deletePod(ctx, victim); err != nil {
			return nil, err
		}
		if err := c.deletePodObject(ctx, victim.name); err != nil {
			return nil, err
		}
		changes = append(changes, fmt.Sprintf("pod %s (%s, a backend of %s) deleted on %s: dropped from the EndpointSlice, CNI DEL through the pod server, pod object deleted",
			victim.name, victim.ip, victim.service, first.name))
		c.prog.note("  %s", changes[len(changes)-1])
		c.step("change: pod deleted", start)
	}

	// A backend added: of the Local-traffic service (else the first) on
	// the first node that has none of it, which then advertises its
	// load-balancer IP too.
	svc := c.svcs[0]
	if i := slices.IndexFunc(c.svcs, func(s *service) bool { return s.local }); i >= 0 {
		svc = c.svcs[i]
	}
	target := first
	for _, n := range live {
		if len(c.backends(svc, n.name)) == 0 {
			target = n
			break
		}
	}
	start := time.Now()
	p := c.newPod(target.name, func(int) string { return svc.name })
	if err := c.podUp(ctx, target, p); err != nil {
		return nil, err
	}
	if err := c.syncSlices(ctx, svc); err != nil {
		return nil, err
	}
	changes = append(changes, fmt.Sprintf("pod %s added on %s (CNI ADD through the pod server: %s) and to the EndpointSlice of %s: a new backend",
		p.name, target.name, p.ip, svc.name))
	c.prog.note("  %s", changes[len(changes)-1])
	c.step("change: backend added", start)

	// A node leaving: the machine goes (its agent stops), its pods and its
	// Kubernetes node are deleted, the cluster releases its node ID, and
	// the route reflector drops it.
	if len(live) < 2 {
		return changes, nil
	}
	gone := live[len(live)-1]
	start = time.Now()
	if err := gone.stop(); err != nil {
		return nil, err
	}
	gone.left = true
	c.mu.Lock()
	var podsGone []string
	affected := map[string]bool{}
	for _, p := range sortedPods(c.pods) {
		if p.node == gone.name {
			podsGone = append(podsGone, p.name)
			affected[p.service] = true
			delete(c.pods, p.name)
		}
	}
	c.mu.Unlock()
	for _, s := range c.svcs {
		if affected[s.name] {
			if err := c.syncSlices(ctx, s); err != nil {
				return nil, err
			}
		}
	}
	for _, name := range podsGone {
		if err := c.deletePodObject(ctx, name); err != nil {
			return nil, err
		}
	}
	if err := c.kube.CoreV1().Nodes().Delete(ctx, gone.name, metav1.DeleteOptions{}); err != nil {
		return nil, err
	}
	db, err := etcddb.NewFromClient(c.etcd, etcddb.Config{Logger: c.log})
	if err != nil {
		return nil, err
	}
	defer db.Close()
	ids, err := nodesync.ReleaseNode(ctx, db, "", gone.name)
	if err != nil {
		return nil, fmt.Errorf("release node %s: %w", gone.name, err)
	}
	if err := c.rr.removeClient(ctx, gone.bgpAddr); err != nil {
		return nil, err
	}
	changes = append(changes, fmt.Sprintf("%s left: its agent stopped, its %d pods and its Kubernetes node deleted, node ID %v released (nodesync.ReleaseNode), its route-reflector client removed",
		gone.name, len(podsGone), ids))
	c.prog.note("  %s", changes[len(changes)-1])
	c.step("change: node left", start)
	return changes, nil
}

// service returns the service named name, nil if none.
func (c *cluster) service(name string) *service {
	for _, s := range c.svcs {
		if s.name == name {
			return s
		}
	}
	return nil
}

// summary reads the cluster's state from its parts.
func (c *cluster) summary(ctx context.Context) (Summary, error) {
	var s Summary
	for _, n := range c.liveNodes() {
		ns := NodeSummary{
			Name:       n.name,
			ID:         n.agent.NodeSync.GetNodeID(),
			PodSubnet:  n.agent.IPAM.PodSubnetThisNodePrefix(),
			VPPAddress: n.vppIPv4(),
			InternalIP: n.internalIP,
			NodeIPs:    slices.Clone(n.agent.NodeIPs.NodeIPs()),
			BGPSpeaker: netip.AddrPortFrom(n.bgpAddr, n.bgpPort),
		}
		c.mu.Lock()
		for _, p := range sortedPods(c.pods) {
			if p.node == n.name {
				ns.Pods = append(ns.Pods, PodSummary{Name: p.name, Service: p.service, IP: p.ip, IP6: p.ip6})
			}
		}
		c.mu.Unlock()
		snap := n.vpp.Snapshot()
		ns.Tunnels = tunnelsOf(snap, tagPrefix)
		ns.Routes = routesOf(snap, tagPrefix)
		for i, r := range ns.Routes {
			if j := slices.IndexFunc(ns.Pods, func(p PodSummary) bool { return netip.PrefixFrom(p.IP, 32) == r.Prefix }); j >= 0 {
				ns.Routes[i].Pod = ns.Pods[j].Name
			}
		}
		var err error
		if ns.NAT44, err = n.nat44(ctx); err != nil {
			return s, err
		}
		if c.opts.ServiceRenderer == agent.ServicesCnat {
			if ns.Cnat, err = n.cnatTranslations(ctx); err != nil {
				return s, err
			}
		}
		peers, err := n.agent.BGP.Manager.Peers(ctx)
		if err != nil {
			return s, fmt.Errorf("%s: BGP peers: %w", n.name, err)
		}
		ns.BGP = bgpSessions(peers)
		s.Nodes = append(s.Nodes, ns)
	}
	for _, svc := range c.svcs {
		ss := ServiceSummary{Name: svc.name, Kind: svc.kind, ClusterIP: svc.clusterIP, ClusterIP6: svc.clusterIP6, Port: servicePort,
			NodePort: svc.nodePort, ExternalIP: svc.externalIP, LoadBalancerIP: svc.lbIP, Backends: []PodOnNode{}}
		if svc.nodePort != 0 {
			ss.ExternalTrafficPolicy = "Cluster"
			if svc.local {
				ss.ExternalTrafficPolicy = "Local"
			}
		}
		c.mu.Lock()
		for _, p := range sortedPods(c.pods) {
			if p.service == svc.name && p.ip.IsValid() {
				ss.Backends = append(ss.Backends, PodOnNode{Pod: p.name, Node: p.node, IP: p.ip, Port: targetPort})
			}
		}
		c.mu.Unlock()
		s.Services = append(s.Services, ss)
	}
	s.Policies = c.policySummary()
	s.RouteReflector = RRSummary{Address: c.rr.addr, ASN: asn}
	var err error
	if s.RouteReflector.Sessions, err = c.rr.sessions(ctx); err != nil {
		return s, err
	}
	if s.RouteReflector.Routes, err = c.rr.routes(ctx); err != nil {
		return s, err
	}
	return s, nil
}

// shutdown stops every component (nodes first, concurrently; then the
// route reflector, the reflector and etcd), deletes the keys the cluster
// wrote to an external etcd and removes the temporary directory.
func (c *cluster) shutdown() error {
	var errs []error
	var nodeStops []func() error
	for _, n := range c.nodes {
		if n.stop != nil {
			nodeStops = append(nodeStops, n.stop)
		}
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	for _, stop := range nodeStops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := stop(); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if c.rr != nil {
		c.rr.stop()
	}
	for i := len(c.stops) - 1; i >= 0; i-- {
		if err := c.stops[i](); err != nil {
			errs = append(errs, err)
		}
	}
	c.wg.Wait()
	for _, n := range c.nodes {
		if n.stop == nil {
			errs = append(errs, n.agent.Close())
		}
	}
	if c.etcd != nil {
		if c.etcdSrv == nil && c.ownKeys {
			cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if _, err := c.etcd.Delete(cctx, statePrefix, clientv3.WithPrefix()); err != nil {
				errs = append(errs, fmt.Errorf("demo: delete %s from etcd: %w", statePrefix, err))
			}
			cancel()
		}
		errs = append(errs, c.etcd.Close())
	}
	if c.etcdSrv != nil {
		errs = append(errs, c.etcdSrv.Close())
	}
	if c.dir != "" {
		errs = append(errs, os.RemoveAll(c.dir))
	}
	return errors.Join(errs...)
}

// wrap breaks text into lines of at most width bytes at blanks.
func wrap(text string, width int) string {
	var b strings.Builder
	n := 0
	for i, w := range strings.Fields(text) {
		if i > 0 && n+1+len(w) > width {
			b.WriteString("\n")
			n = 0
		} else if i > 0 {
			b.WriteString(" ")
			n++
		}
		b.WriteString(w)
		n += len(w)
	}
	return b.String()
}
