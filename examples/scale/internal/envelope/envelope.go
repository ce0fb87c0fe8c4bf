// Package envelope measures one vswitchkit agent against synthetic
// clusters of growing size: for every size it fills an in-process etcd
// with a cluster (package synth), starts the full agent in a child process
// (package agentproc) and measures its start-up, its memory and the
// latency of incremental changes. [Table] and [Plot] present the results.
package envelope

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/vswitchkit/vswitchkit/cniserver"
	"github.com/vswitchkit/vswitchkit/cniserver/cniplugin"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/embedetcd"
	"github.com/vswitchkit/vswitchkit/examples/scale/internal/agentproc"
	"github.com/vswitchkit/vswitchkit/examples/scale/internal/synth"
)

// Config configures a run. The zero value measures the sizes of the
// issue with 200 events per incremental measure.
type Config struct {
	// Sizes are the cluster sizes (nodes). Default: 500, 1000, 2000, 5000.
	Sizes []int
	// Events is the number of samples of every incremental measure.
	// Default 200.
	Events int
	// LocalPods is the number of pods on the measured node. Default 110
	// (Kubernetes' default maximum per node).
	LocalPods int
	// Layout is the key layout the cluster is written in
	// (kubemodel.LayoutFlat or kubemodel.LayoutNodePods). Default:
	// kubemodel.CurrentLayout, the reflector's.
	Layout int
	// NetworkPolicies: the cluster has two NetworkPolicies per namespace
	// (synth.Spec.NetworkPolicies), so that the agent's policy processor
	// holds a peer index of every pod and renders ACLs for its own.
	// Default: none (the envelope's bars were set without).
	NetworkPolicies bool
	// Executable is the program to start as the agent child: it must run
	// agentproc.Main when agentproc.EnvConfig is set. Default: this
	// program (os.Executable).
	Executable string
	// ProfileDir, when set, receives CPU profiles of the start-up and of
	// the incremental changes and a heap profile (after start-up) of the
	// agent child per size: <nodes>-cpu-startup.pprof,
	// <nodes>-cpu-changes.pprof, <nodes>-heap.pprof.
	ProfileDir string
	// ChildLogs receives the agent child's logs (warnings and errors).
	// Default: discard.
	ChildLogs io.Writer
	// Progress shows the progress. Default: none.
	Progress Progress
	// Logger receives the runner's logs. Default: discard.
	Logger *slog.Logger
}

// Measure names an incremental measure.
type Measure string

// The incremental measures.
const (
	PodAdd         Measure = "pod add"
	EndpointChange Measure = "endpoint change"
	ServiceAdd     Measure = "service add"
	NodeJoin       Measure = "node join"
	NodeLeave      Measure = "node leave"
)

// Measures lists the incremental measures in the order they run.
var Measures = []Measure{PodAdd, EndpointChange, ServiceAdd, NodeJoin, NodeLeave}

// Latency summarizes the samples of one measure.
type Latency struct {
	N        int
	P50, P99 time.Duration
	Max      time.Duration
}

// Result is what one cluster size measured.
type Result struct {
	Nodes, Pods, Services, Endpoints int
	Layout                           int // the key layout of the cluster
	Keys                             int // etcd keys of the cluster

	// ResyncStart, ResyncDone and Programmed are the times from the start
	// of the agent's process to the start of its start-up resync (the etcd
	// snapshot read, decoded and delivered to the loop), to the end of its
	// handlers (the desired state computed) and to every VPP key
	// configured.
	ResyncStart, ResyncDone, Programmed time.Duration
	// VPPRequests is the number of requests the VPP stand-in handled until
	// then; VPPKeys the number of keys the driver configured.
	VPPRequests uint64
	VPPKeys     int
	// PeakRSS is the agent process's peak resident set (VmHWM) over the
	// whole run; StartupRSS its peak at the end of start-up; LiveHeap the
	// heap in use after a forced GC at the end of start-up.
	PeakRSS, StartupRSS, LiveHeap uint64
	// EtcdRSS is the resident set of the runner's process, which holds
	// etcd, after the cluster was written (not the agent's).
	EtcdRSS uint64
	// NetworkPolicies is the number of NetworkPolicies in the cluster;
	// Policies, PolicyPeers and PolicyIsolated what the agent's policy
	// processor held after start-up: valid policies, pods in its peer
	// index, local pods isolated for ingress.
	NetworkPolicies                       int
	Policies, PolicyPeers, PolicyIsolated int

	Latency map[Measure]Latency
	// Etcd is, for the measures that write to etcd, the part of their
	// latency that is etcd's: from the write to a watch of the runner
	// (another etcd client, like the agent's watcher) receiving it.
	Etcd map[Measure]Latency
	// Agent is, for the same measures, the rest of every sample: from
	// the runner's watch receiving the change (the agent's watcher
	// receives it at about the same time) to the stand-in receiving the
	// last request.
	Agent map[Measure]Latency
}

// Run measures every size in turn.
func Run(ctx context.Context, cfg Config) ([]Result, error) {
	if len(cfg.Sizes) == 0 {
		cfg.Sizes = []int{500, 1000, 2000, 5000}
	}
	if cfg.Events <= 0 {
		cfg.Events = 200
	}
	if cfg.LocalPods <= 0 {
		cfg.LocalPods = 110
	}
	if cfg.Layout == 0 {
		cfg.Layout = kubemodel.CurrentLayout
	}
	if cfg.Executable == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("find this program: %w", err)
		}
		cfg.Executable = exe
	}
	if cfg.ChildLogs == nil {
		cfg.ChildLogs = io.Discard
	}
	if cfg.Progress == nil {
		cfg.Progress = noProgress{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	for _, n := range cfg.Sizes {
		if n < 2 || n > 10000 {
			return nil, fmt.Errorf("cluster size %d: want 2 to 10000 nodes", n)
		}
	}
	var out []Result
	for _, n := range cfg.Sizes {
		r, err := runSize(ctx, cfg, n)
		if err != nil {
			return out, fmt.Errorf("%d nodes: %w", n, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// sizeRun is the state of the measurement of one size.
type sizeRun struct {
	cfg  Config
	n    int
	spec synth.Spec
	dir  string
	cli  *clientv3.Client
	log  *slog.Logger
	prog Progress
}

func runSize(ctx context.Context, cfg Config, n int) (res Result, err error) {
	// A short directory: the pod server's socket path must fit sun_path.
	dir, err := os.MkdirTemp("", "vskscale")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	etcd, err := embedetcd.Start(ctx, embedetcd.Config{Dir: filepath.Join(dir, "etcd"), UnsafeNoFsync: true, QuotaBackendBytes: 8 << 30})
	if err != nil {
		return res, err
	}
	defer etcd.Close()
	cli, err := etcd.Client()
	if err != nil {
		return res, err
	}
	defer cli.Close()
	spec := synth.New(n, nil)
	spec.NetworkPolicies = cfg.NetworkPolicies
	spec.Layout = cfg.Layout
	s := &sizeRun{cfg: cfg, n: n, spec: spec, dir: dir, cli: cli,
		log: cfg.Logger.With(slog.Int("nodes", n)), prog: cfg.Progress}
	return s.run(ctx, etcd.Endpoints()[0])
}

func (s *sizeRun) childConfig(mode agentproc.Mode, etcd string) agentproc.Config {
	c := agentproc.Config{Mode: mode, Etcd: etcd, NodeName: synth.MeasuredNode,
		StateDir: filepath.Join(s.dir, "agent"), CNISocket: filepath.Join(s.dir, "cni.sock")}
	if mode == agentproc.Measure && s.cfg.ProfileDir != "" {
		c.ProfilePrefix = filepath.Join(s.cfg.ProfileDir, fmt.Sprintf("%d-", s.n))
	}
	return c
}

func (s *sizeRun) run(ctx context.Context, etcd string) (Result, error) {
	res := Result{Nodes: s.n, Layout: s.cfg.Layout, Latency: map[Measure]Latency{}, Etcd: map[Measure]Latency{}, Agent: map[Measure]Latency{}}

	// The measured node first runs alone in the cluster, and gets its pods
	// through its pod server, as on a node that joined and got pods.
	st := s.prog.Stage(s.n, "prepare the measured node", s.cfg.LocalPods)
	if _, err := synth.Write(ctx, s.cli, slices.Values(s.spec.MeasuredNodeObjects()), nil); err != nil {
		return res, err
	}
	prep, err := startChild(s.cfg.Executable, s.childConfig(agentproc.Prepare, etcd), s.cfg.ChildLogs)
	if err != nil {
		return res, err
	}
	local, err := s.prepare(ctx, prep, st)
	if stopErr := prep.stop(); err == nil {
		err = stopErr
	}
	if err != nil {
		return res, fmt.Errorf("prepare the measured node: %w", err)
	}
	st.Done()

	// The rest of the cluster, written as the reflector and the other
	// nodes' agents would have.
	s.spec.LocalPods = local
	s.spec.Nodes = s.n
	res.Pods, res.Services, res.Endpoints = s.spec.Pods(), s.spec.Services, s.spec.Endpoints()
	res.NetworkPolicies = s.spec.NetworkPolicyCount()
	total := s.spec.Namespaces + 1 + res.NetworkPolicies + 3*(s.n-1) + 2*res.Pods + 2*res.Services
	st = s.prog.Stage(s.n, fmt.Sprintf("write %d keys", total), total)
	keys, err := synth.Write(ctx, s.cli, s.spec.Cluster, st.Add)
	if err != nil {
		return res, fmt.Errorf("write the cluster: %w", err)
	}
	res.Keys = keys + len(s.spec.MeasuredNodeObjects())
	res.EtcdRSS = agentproc.ReadMemory().RSS
	st.Done()
	if s.log.Enabled(ctx, slog.LevelInfo) {
		// What etcd alone takes to serve the state the agent reads at
		// start-up (the part of its start-up that is etcd's).
		start := time.Now()
		resp, err := s.cli.Get(ctx, kubemodel.EtcdKey("", kubemodel.KeyRoot), clientv3.WithPrefix())
		if err != nil {
			return res, err
		}
		s.log.Info("etcd read of the Kubernetes state", slog.Int("keys", len(resp.Kvs)), slog.Duration("took", time.Since(start)))
	}

	// The measured start: the agent restarts on its node, in the full
	// cluster, with a fresh VPP.
	st = s.prog.Stage(s.n, "agent start-up", 1)
	c, err := startChild(s.cfg.Executable, s.childConfig(agentproc.Measure, etcd), s.cfg.ChildLogs)
	if err != nil {
		return res, err
	}
	defer func() {
		if c != nil {
			_ = c.stop()
		}
	}()
	r, err := c.expect(ctx, 10*time.Minute, "programmed", 0)
	if err != nil {
		return res, fmt.Errorf("start-up: %w", err)
	}
	up := r.Startup
	res.ResyncStart = time.Unix(0, up.ResyncStart).Sub(c.started)
	res.ResyncDone = time.Unix(0, up.ResyncDone).Sub(c.started)
	res.Programmed = time.Unix(0, up.Programmed).Sub(c.started)
	res.VPPRequests, res.VPPKeys = up.VPPRequests, up.Keys
	res.StartupRSS, res.LiveHeap = up.PeakRSS, up.LiveHeap
	res.Policies, res.PolicyPeers, res.PolicyIsolated = up.Policies, up.PolicyPeers, up.PolicyIsolated
	st.Add(1)
	st.Done()
	s.log.Info("start-up", slog.Duration("resyncStart", res.ResyncStart), slog.Duration("resyncDone", res.ResyncDone), slog.Duration("programmed", res.Programmed),
		slog.Uint64("requests", res.VPPRequests), slog.Int("keys", res.VPPKeys), slog.Uint64("liveHeap", res.LiveHeap),
		slog.Uint64("heapSys", up.HeapSys), slog.Any("memory", up.Memory), slog.Uint64("runnerRSS", res.EtcdRSS),
		slog.Int("policies", res.Policies), slog.Int("policyPeers", res.PolicyPeers), slog.Int("isolated", res.PolicyIsolated))
	if up.Failed > 0 || up.Pending > 0 {
		return res, fmt.Errorf("start-up: %d keys failed, %d pending", up.Failed, up.Pending)
	}

	for _, m := range Measures {
		if m == NodeLeave {
			continue // measured with the joins
		}
		if err := s.measure(ctx, c, m, &res); err != nil {
			return res, fmt.Errorf("%s: %w", m, err)
		}
	}

	final, err := c.stats(ctx)
	if err != nil {
		return res, err
	}
	res.PeakRSS = final.PeakRSS
	if final.Failed > 0 || final.Pending > 0 || final.EventErrors > 0 {
		return res, fmt.Errorf("after the incremental changes: %d keys failed, %d pending, %d events failed",
			final.Failed, final.Pending, final.EventErrors)
	}
	err = c.stop()
	c = nil
	return res, err
}

// cniConf is the network configuration the runtime passes to the plugin.
var cniConf = []byte(`{"cniVersion":"1.1.0","name":"vswitchkit","type":"vswitchkit-cni"}`)

// cniAdd adds pod ns/name through the agent's pod server, as the CNI
// plugin does, and returns its address.
func (s *sizeRun) cniAdd(ctx context.Context, socket, ns, name, containerID string) (netip.Addr, error) {
	out, err := cniplugin.Call(ctx, socket, "ADD", &skel.CmdArgs{
		ContainerID: containerID, Netns: "/run/netns/" + name, IfName: "eth0",
		Args: "K8S_POD_NAMESPACE=" + ns + ";K8S_POD_NAME=" + name, StdinData: cniConf,
	})
	if err != nil {
		return netip.Addr{}, fmt.Errorf("CNI ADD %s/%s: %w", ns, name, err)
	}
	var result struct{ IPs []struct{ Address string } }
	if err := json.Unmarshal(out, &result); err != nil || len(result.IPs) != 1 {
		return netip.Addr{}, fmt.Errorf("CNI ADD %s/%s: unexpected result %s", ns, name, out)
	}
	p, err := netip.ParsePrefix(result.IPs[0].Address)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("CNI ADD %s/%s: %w", ns, name, err)
	}
	return p.Addr(), nil
}

func (s *sizeRun) cniDel(ctx context.Context, socket, ns, name, containerID string) error {
	_, err := cniplugin.Call(ctx, socket, "DEL", &skel.CmdArgs{
		ContainerID: containerID, Netns: "/run/netns/" + name, IfName: "eth0",
		Args: "K8S_POD_NAMESPACE=" + ns + ";K8S_POD_NAME=" + name, StdinData: cniConf,
	})
	if err != nil {
		return fmt.Errorf("CNI DEL %s/%s: %w", ns, name, err)
	}
	return nil
}

// prepare adds the measured node's pods through the prepare child's pod
// server and returns their addresses.
func (s *sizeRun) prepare(ctx context.Context, c *child, st Stage) ([]netip.Addr, error) {
	if _, err := c.expect(ctx, 5*time.Minute, "ready", 0); err != nil {
		return nil, err
	}
	socket := s.childConfig(agentproc.Prepare, "").CNISocket
	var out []netip.Addr
	for i := range s.cfg.LocalPods {
		ip, err := s.cniAdd(ctx, socket, synth.LocalPodNamespace, synth.LocalPodName(i), synth.LocalContainerID(i))
		if err != nil {
			return nil, err
		}
		out = append(out, ip)
		st.Add(1)
	}
	return out, nil
}

// measure takes the samples of measure m (for NodeJoin, of NodeLeave too).
func (s *sizeRun) measure(ctx context.Context, c *child, m Measure, res *Result) error {
	samples := map[Measure][]time.Duration{}
	etcdPart := map[Measure][]time.Duration{}
	w, err := startEtcdWatch(ctx, s.cli, kubemodel.DefaultPrefix)
	if err != nil {
		return err
	}
	defer w.close()
	// etcd notes the etcd part of the last measured change.
	etcd := func(m Measure) error {
		d, err := w.last(ctx)
		etcdPart[m] = append(etcdPart[m], d)
		return err
	}
	total := s.cfg.Events
	if m == NodeJoin {
		total *= 2
	}
	st := s.prog.Stage(s.n, string(m), total)
	defer st.Done()
	socket := s.childConfig(agentproc.Measure, "").CNISocket
	for i := range s.cfg.Events {
		switch m {
		case PodAdd:
			ns, name, cid := "bench", "bench-"+strconv.Itoa(i), "c-bench-"+strconv.Itoa(i)
			host := cniserver.HostIfName(cid, "eth0")
			var replied time.Time
			start, seen, err := c.probe(ctx, []string{"afpacket-add " + host}, func() error {
				_, err := s.cniAdd(ctx, socket, ns, name, cid)
				replied = time.Now()
				return err
			})
			if err != nil {
				return err
			}
			// The latency is the ADD as the runtime sees it, until the pod
			// server's answer, which comes after the AddPod event was
			// committed (the driver applies an update commit before
			// Commit returns); the probe checks that the stand-in had the
			// pod's interface by then.
			if seen.After(replied) {
				return fmt.Errorf("pod %s: the stand-in got its interface %v after the CNI answer", name, seen.Sub(replied))
			}
			samples[PodAdd] = append(samples[PodAdd], replied.Sub(start))
			if err := s.cniDel(ctx, socket, ns, name, cid); err != nil {
				return err
			}
		case EndpointChange:
			svc := s.endpointService(i)
			ext := netip.AddrPortFrom(synth.ClusterIP(svc), synth.ServicePort)
			extra := synth.PodIP(1, 200+i%50)
			local := netip.AddrPortFrom(extra, synth.TargetPort)
			ns, name := s.spec.ServiceName(svc)
			key := kubemodel.EtcdKey("", kubemodel.EndpointsKey(ns, name))
			d, err := c.latency(ctx, []string{agentproc.LBLocalAdd(ext, local)}, func() error {
				return w.txn(ctx, []synth.KV{{Key: key, Value: s.spec.EndpointsOf(svc, []netip.Addr{extra})}}, nil)
			})
			if err != nil {
				return err
			}
			samples[EndpointChange] = append(samples[EndpointChange], d)
			if err := etcd(EndpointChange); err != nil {
				return err
			}
			if _, err := c.latency(ctx, []string{agentproc.LBLocalDel(ext, local)}, func() error {
				return w.txn(ctx, []synth.KV{{Key: key, Value: s.spec.EndpointsOf(svc, nil)}}, nil)
			}); err != nil {
				return fmt.Errorf("revert: %w", err)
			}
		case ServiceAdd:
			ns, name := "bench", "new-"+strconv.Itoa(i)
			ip := netip.AddrFrom4([4]byte{10, 104, byte(i >> 8), byte(i) + 1})
			ext := netip.AddrPortFrom(ip, synth.ServicePort)
			var addrs []synth.EndpointAddress
			for k := range 10 {
				node := 1 + (i*10+k)%(s.n-1)
				addrs = append(addrs, synth.EndpointAddress{IP: synth.PodIP(node, k), Node: synth.NodeName(node), PodNamespace: ns, PodName: fmt.Sprintf("new-%d-%d", i, k)})
			}
			svcKey := kubemodel.EtcdKey("", kubemodel.ServiceKey(ns, name))
			epKey := kubemodel.EtcdKey("", kubemodel.EndpointsKey(ns, name))
			d, err := c.latency(ctx, []string{agentproc.LBAdd(ext)}, func() error {
				return w.txn(ctx, []synth.KV{
					{Key: svcKey, Value: synth.ServiceObject(ns, name, ip, synth.ClusterIPService, false, i)},
					{Key: epKey, Value: synth.EndpointsObject(ns, name, false, addrs)},
				}, nil)
			})
			if err != nil {
				return err
			}
			samples[ServiceAdd] = append(samples[ServiceAdd], d)
			if err := etcd(ServiceAdd); err != nil {
				return err
			}
			if _, err := c.latency(ctx, []string{agentproc.LBDel(ext)}, func() error {
				return w.txn(ctx, nil, []string{svcKey, epKey})
			}); err != nil {
				return fmt.Errorf("remove: %w", err)
			}
		case NodeJoin:
			id := synth.NodeID(s.n + i)
			name := fmt.Sprintf("join-%05d", i)
			kvs := synth.NodeKVs(name, id)
			d, err := c.latency(ctx, []string{agentproc.VxlanAdd(synth.NodeIP(id)),
				agentproc.RouteAdd(synth.PodSubnet(id)), agentproc.RouteAdd(synth.HostSubnet(id))}, func() error {
				return w.txn(ctx, kvs, nil)
			})
			if err != nil {
				return err
			}
			samples[NodeJoin] = append(samples[NodeJoin], d)
			if err := etcd(NodeJoin); err != nil {
				return err
			}
			st.Add(1)
			var keys []string
			for _, kv := range kvs {
				keys = append(keys, kv.Key)
			}
			d, err = c.latency(ctx, []string{agentproc.VxlanDel(synth.NodeIP(id)),
				agentproc.RouteDel(synth.PodSubnet(id)), agentproc.RouteDel(synth.HostSubnet(id))}, func() error {
				return w.txn(ctx, nil, keys)
			})
			if err != nil {
				return fmt.Errorf("%s: %w", NodeLeave, err)
			}
			samples[NodeLeave] = append(samples[NodeLeave], d)
			if err := etcd(NodeLeave); err != nil {
				return err
			}
		}
		st.Add(1)
	}
	for k, v := range samples {
		res.Latency[k] = summarize(v)
		l := res.Latency[k]
		e := summarize(etcdPart[k])
		if e.N > 0 {
			res.Etcd[k] = e
			agent := make([]time.Duration, len(v))
			for i := range v {
				agent[i] = v[i] - etcdPart[k][i]
			}
			res.Agent[k] = summarize(agent)
		}
		s.log.Info("measured", slog.String("measure", string(k)), slog.Duration("p50", l.P50), slog.Duration("p99", l.P99), slog.Duration("max", l.Max),
			slog.Duration("etcd p50", e.P50), slog.Duration("etcd p99", e.P99))
	}
	evs, err := c.events(ctx)
	if err != nil {
		return err
	}
	for _, e := range evs {
		s.log.Info("loop", slog.String("measure", string(m)), slog.String("event", e.Kind), slog.Int("n", e.N),
			slog.Duration("p50", e.P50), slog.Duration("p99", e.P99), slog.Duration("max", e.Max),
			slog.String("slowest handler", e.SlowHandler), slog.Duration("took", e.SlowDuration))
	}
	return nil
}

// endpointService picks the service of the i-th endpoint change: a
// ClusterIP service with one port, one change in ten to a service with a
// full slice of endpoints.
func (s *sizeRun) endpointService(i int) int {
	n := s.spec.Services
	if i%10 == 0 {
		big := (i/10)%max(1, n/s.spec.BigEvery)*s.spec.BigEvery + s.spec.BigEvery - 1
		if big < n {
			return big
		}
	}
	for k := (i*37 + 2) % n; ; k = (k + 1) % n {
		if synth.Kind(k) == synth.ClusterIPService && !synth.TwoPorts(k) && s.spec.EndpointCount(k) < synth.MaxEndpointsPerSlice {
			return k
		}
	}
}

// summarize returns the nearest-rank percentiles of samples.
func summarize(samples []time.Duration) Latency {
	if len(samples) == 0 {
		return Latency{}
	}
	s := slices.Clone(samples)
	slices.Sort(s)
	rank := func(p float64) time.Duration {
		i := int(p*float64(len(s))+0.999999) - 1
		return s[min(max(i, 0), len(s)-1)]
	}
	return Latency{N: len(s), P50: rank(0.50), P99: rank(0.99), Max: s[len(s)-1]}
}
