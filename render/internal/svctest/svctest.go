// Package svctest is one table of service scenarios that every service
// renderer of the module runs on the VPP stand-in (render/svcnat onto
// NAT44-ED, render/svccnat onto cnat): the partial agent of
// render/internal/rendertest in a dual-stack node, Kubernetes services and
// endpoints as KubeStateChange events, and after each step what VPP
// serves — read from VPP's own dumps and written the same way for both
// renderers — compared with the case's expectation. Where the renderers
// differ by design (NAT44 translates IPv4 only; cnat serves external
// frontends with this node's backends), a step says so.
package svctest

import (
	"context"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.fd.io/govpp/adapter"
	"google.golang.org/protobuf/proto"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/ipam"
	"github.com/vswitchkit/vswitchkit/nodesync/nodesynctest"
	"github.com/vswitchkit/vswitchkit/render/internal/rendertest"
	"github.com/vswitchkit/vswitchkit/render/nodeconn"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppdrivertest"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppsim"
)

// Renderer is a service renderer the cases run against.
type Renderer struct {
	// Name is rendertest.Options.ServiceRenderer's value.
	Name string
	// IPv6 tells whether it renders IPv6 frontends.
	IPv6 bool
	// BackendRequest is the VPP request that one backend change of one
	// frontend costs.
	BackendRequest string
	// read returns what VPP serves, in the cases' form.
	read func(ctx context.Context, a adapter.VppAPI) ([]string, error)
}

// The module's renderers.
var (
	NAT44 = Renderer{Name: "nat44", BackendRequest: "nat44_lb_static_mapping_add_del_local", read: readNAT44}
	Cnat  = Renderer{Name: "cnat", IPv6: true, BackendRequest: "cnat_translation_update", read: readCnat}
)

var (
	probability = regexp.MustCompile(`/[0-9]+$`)
	mappingFlag = map[string]bool{"out2in-only": true, "self-twice-nat": true, "twice-nat": true}
)

// readNAT44 reads NAT44-ED's static and load-balanced mappings as
// "proto frontend -> backends" (probabilities and flags left out).
func readNAT44(ctx context.Context, a adapter.VppAPI) ([]string, error) {
	n, err := vppdrivertest.ReadNAT44(ctx, a, rendertest.TagPrefix)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, m := range append(slices.Clone(n.Static), n.LB...) {
		var keep []string
		for _, f := range strings.Fields(m) {
			if !mappingFlag[f] {
				keep = append(keep, probability.ReplaceAllString(f, ""))
			}
		}
		out = append(out, strings.Join(keep, " "))
	}
	slices.Sort(out)
	return out, nil
}

// readCnat reads cnat's translations the same way (lb type left out).
func readCnat(ctx context.Context, a adapter.VppAPI) ([]string, error) {
	c, err := vppdrivertest.ReadCnat(ctx, a)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, t := range c.Translations {
		out = append(out, strings.TrimSuffix(t, " maglev"))
	}
	slices.Sort(out)
	return out, nil
}

// The node of the cases: node 1 of a dual-stack cluster (IPAM's IPv4
// defaults and an IPv6 plan with per-node /120 subnets): pods
// 10.1.1.x and fd00:1::1xx, node addresses 192.168.16.1 and fd00:16::1.
const NodeName = "node-1"

// IPv6Plan is the second family's address plan of the cases' node.
var IPv6Plan = ipam.Config{
	PodSubnetCIDR:        netip.MustParsePrefix("fd00:1::/104"),
	VPPHostSubnetCIDR:    netip.MustParsePrefix("fd00:30::/112"),
	NodeInterconnectCIDR: netip.MustParsePrefix("fd00:16::/64"),
	VXLANCIDR:            netip.MustParsePrefix("fd00:31::/64"),
	ServiceCIDR:          netip.MustParsePrefix("fd00:96::/108"),
}

// Cluster is the Kubernetes state of a case, as the reflector would keep
// it, and the node's agent it is pushed to.
type Cluster struct {
	t     *testing.T
	r     Renderer
	vpp   *vppsim.VPP
	node  *rendertest.Node
	db    *nodesynctest.MemDB
	rec   *vppdrivertest.RequestRecorder
	agent *rendertest.Agent
	kube  controller.KubeStateData
}

func (c *Cluster) newAdapter() adapter.VppAPI { return c.rec.Wrap(c.vpp.NewAdapter()) }

func (c *Cluster) start() {
	c.agent = rendertest.Start(c.t, rendertest.Options{Name: NodeName, DB: c.db, NewAdapter: c.newAdapter, Node: c.node,
		DualStack: &IPv6Plan, Services: true, ServiceRenderer: c.r.Name, KubeState: c.snapshot(),
		NodeConn: nodeconn.Config{Uplink: nodeconn.Uplink{AfPacketHostIf: "eth1"},
			HostInterconnect: nodeconn.HostInterconnect{AfPacketHostIf: "vpp1"}}})
	c.agent.WaitConfigured(c.t)
}

func (c *Cluster) snapshot() controller.KubeStateData {
	out := controller.NewKubeStateData()
	for r, kv := range c.kube {
		out[r] = controller.KeyValuePairs{}
		for k, v := range kv {
			out[r][k] = v
		}
	}
	return out
}

// change applies one change of the Kubernetes state (v nil: deleted).
func (c *Cluster) change(resource, key string, v proto.Message) {
	c.t.Helper()
	if c.kube[resource] == nil {
		c.kube[resource] = controller.KeyValuePairs{}
	}
	prev := c.kube[resource][key]
	ev := &controller.KubeStateChange{Resource: resource, Key: key, PrevValue: prev, NewValue: v}
	if v == nil {
		delete(c.kube[resource], key)
		ev.NewValue = nil
	} else {
		c.kube[resource][key] = v
	}
	require.NoError(c.t, c.agent.Loop.PushEvent(ev))
	c.agent.Sync(c.t)
	c.agent.WaitConfigured(c.t)
}

// SetService sets a service.
func (c *Cluster) SetService(s *kubemodel.Service) {
	c.change(kubemodel.ServiceResource, kubemodel.ServiceKey(s.Namespace, s.Name), s)
}

// DeleteService deletes a service.
func (c *Cluster) DeleteService(name string) {
	c.change(kubemodel.ServiceResource, kubemodel.ServiceKey("default", name), nil)
}

// SetEndpoints sets the endpoints of service name: addresses of this node
// are written "local:<ip>", others plain.
func (c *Cluster) SetEndpoints(name string, ports []Port, addrs ...string) {
	sub := &kubemodel.EndpointSubset{}
	for _, a := range addrs {
		ip, local := strings.CutPrefix(a, "local:")
		ea := &kubemodel.EndpointAddress{Ip: ip, NodeName: "node-2"}
		if local {
			ea.NodeName = NodeName
		}
		sub.Addresses = append(sub.Addresses, ea)
	}
	for _, p := range ports {
		sub.Ports = append(sub.Ports, &kubemodel.EndpointPort{Name: p.Name, Port: p.Target, Protocol: p.Proto})
	}
	c.change(kubemodel.EndpointsResource, kubemodel.EndpointsKey("default", name),
		&kubemodel.Endpoints{Name: name, Namespace: "default", Subsets: []*kubemodel.EndpointSubset{sub}})
}

// Port is a service port.
type Port struct {
	Name     string
	Proto    kubemodel.Protocol
	Port     int32
	Target   int32
	NodePort int32
}

// Service returns a service of the default namespace.
func Service(name string, clusterIPs []string, ports ...Port) *kubemodel.Service {
	s := &kubemodel.Service{Name: name, Namespace: "default", ClusterIps: clusterIPs}
	for _, p := range ports {
		s.Ports = append(s.Ports, &kubemodel.ServicePort{Name: p.Name, Protocol: p.Proto, Port: p.Port,
			TargetPortNumber: p.Target, NodePort: p.NodePort})
		if p.NodePort != 0 {
			s.Type = kubemodel.Service_NODE_PORT
		}
	}
	return s
}

// Step is one step of a case.
type Step struct {
	// Name says what the step does.
	Name string
	// Apply changes the cluster (nil: nothing).
	Apply func(c *Cluster)
	// Restart, if set, restarts "vpp" (all its state lost: the driver
	// restores it) or the "agent" (on the VPP that holds everything: it
	// must write nothing) after Apply.
	Restart string
	// Want is what VPP serves after the step: "proto frontend ->
	// backends", sorted backends; IPv6 frontends are dropped for a
	// renderer without IPv6.
	Want []string
	// Differ, when set for a renderer's name, replaces Want for it, with
	// the reason.
	Differ map[string]Difference
	// Requests, when not zero, is the number of VPP requests the step
	// costs, all of them the renderer's BackendRequest (after a Restart:
	// the agent's requests, which must be none).
	Requests int
	// Requests6 is the part of Requests that IPv6 frontends cost (not
	// expected of a renderer without IPv6).
	Requests6 int
}

// Difference is what a renderer serves instead of a step's Want, and why.
type Difference struct {
	Why  string
	Want []string
}

// Case is one scenario.
type Case struct {
	Name  string
	Steps []Step
}

// Run runs every case of Cases against renderer r, each on a fresh
// stand-in, node and agent.
func Run(t *testing.T, r Renderer) {
	for _, cs := range Cases() {
		t.Run(cs.Name, func(t *testing.T) {
			c := &Cluster{t: t, r: r, vpp: vppsim.New(vppsim.Config{HostInterfaces: []string{"eth1", "vpp1"}}), node: &rendertest.Node{},
				db: nodesynctest.NewMemDB(), rec: &vppdrivertest.RequestRecorder{}, kube: controller.NewKubeStateData()}
			c.start()
			for i, st := range cs.Steps {
				before := c.rec.Counts()
				if st.Apply != nil {
					st.Apply(c)
				}
				switch st.Restart {
				case "vpp":
					connects := c.agent.Driver.Stats().Connects
					c.vpp.Restart()
					require.Eventually(t, func() bool { return c.agent.Driver.Stats().Connects > connects }, 30*time.Second, 5*time.Millisecond)
					c.agent.Sync(t)
					c.agent.WaitConfigured(t)
				case "agent":
					c.agent.Stop()
					before = c.rec.Counts()
					c.start()
				}
				want, why := st.Want, ""
				if d, ok := st.Differ[r.Name]; ok {
					want, why = d.Want, d.Why
				}
				if !r.IPv6 {
					want = slices.DeleteFunc(slices.Clone(want), func(line string) bool { return strings.Contains(strings.Fields(line)[1], "[") })
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				got, err := r.read(ctx, c.vpp.NewAdapter())
				cancel()
				require.NoError(t, err)
				if len(want) == 0 {
					want = nil
				}
				assert.Equal(t, want, got, "step %d (%s) %s", i, st.Name, why)
				writes := writesBetween(before, c.rec.Counts())
				switch {
				case st.Restart == "agent":
					assert.Empty(t, writes, "step %d (%s): an agent restart on a VPP that holds everything writes nothing", i, st.Name)
				case st.Requests != 0:
					n := st.Requests
					if !r.IPv6 {
						n -= st.Requests6
					}
					assert.Equal(t, map[string]uint64{r.BackendRequest: uint64(n)}, writes, "step %d (%s)", i, st.Name)
				}
			}
			assert.Zero(t, c.agent.Loop.Stats().Failed)
		})
	}
}

// writesBetween returns the requests that change VPP sent between two
// counts.
func writesBetween(before, after map[string]uint64) map[string]uint64 {
	out := map[string]uint64{}
	for k, v := range after {
		if v > before[k] && !vppdrivertest.ReadOnlyMessage(k) {
			out[k] = v - before[k]
		}
	}
	return out
}

// Lines builds expectations: "proto vip:port -> backends".
func Lines(lines ...string) []string {
	out := slices.Clone(lines)
	slices.Sort(out)
	return out
}
