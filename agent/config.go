package agent

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"path/filepath"
	"reflect"
	"strings"
	"time"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/controller/podiface"
	"github.com/vswitchkit/vswitchkit/ipam"
	"github.com/vswitchkit/vswitchkit/render/nodeconn"
)

// Service renderers built into the agent (Config.Services).
const (
	ServicesNAT44 = "nat44" // render/svcnat: NAT44-ED, IPv4 (the default)
	ServicesCnat  = "cnat"  // render/svccnat: cnat, both IP families
	ServicesNone  = "none"  // no built-in renderer: add your own with Agent.AddServiceRenderer
)

// IPAM store kinds.
const (
	StoreBolt = "bolt" // a local bbolt file in the state directory
	StoreEtcd = "etcd" // records in etcd under /vswitchkit/ipam/<node>/
)

// Config is one node's agent configuration. Every field has a documented
// default; NodeName is required. The JSON names are the keys of the
// daemon's YAML configuration file.
type Config struct {
	// NodeName is this node's Kubernetes node name. Required.
	NodeName string `json:"nodeName"`
	// StateDir holds the local state: the watcher's mirror, nodesync's
	// saved node ID, the bbolt IPAM store (or the etcd IPAM store's lease
	// file), the CNI attachments. Default:
	// /var/lib/vswitchkit.
	StateDir string `json:"stateDir"`
	// KubeStatePrefix is the etcd prefix of the Kubernetes state. Default:
	// kubemodel.DefaultPrefix.
	KubeStatePrefix string `json:"kubeStatePrefix"`
	// ExternalConfigPrefix is this node's external-configuration prefix.
	// Default: /vswitchkit/config/<nodeName>/.
	ExternalConfigPrefix string `json:"externalConfigPrefix"`
	// AllPods makes the watcher deliver the pods of every node. By
	// default it delivers this node's pods only (watcher.Config.NodeName;
	// in the reflector's per-node key layout etcd does not even send the
	// others): no handler of the agent uses the others (NetworkPolicy
	// uses every pod's compact peer record), and in a large cluster they
	// are most of the Kubernetes state (memory, start-up time, and a copy
	// of every pod change to every agent).
	AllPods bool `json:"allPods"`
	// IPFamily is the cluster's IP family: "ipv4" (default), "ipv6" (IPAM
	// is an IPv6 plan) or "dual" (dual-stack: IPAM is the IPv4 plan and
	// IPAM6 the IPv6 one; every pod gets an address of each family, the
	// mesh carries both over the IPv4 underlay). IPv6 services need
	// Services "cnat": "nat44" with "ipv6" is a configuration error, and
	// with "dual" IPv6 frontends are reported unsupported by the NAT44
	// renderer (svcnat's stats) and get nothing.
	IPFamily string `json:"ipFamily"`
	// IPAM is the address plan (see ipam.Config; Store, EventLoop and
	// Logger are set by the agent): IPv4, or IPv6 with IPFamily "ipv6",
	// where a plan that sets none of its ranges is DefaultIPv6Plan.
	IPAM ipam.Config `json:"ipam"`
	// IPAM6 is the IPv6 address plan with IPFamily "dual" (a second IPAM:
	// its allocations are kept in ipam6.db, or under /vswitchkit/ipam6/ in
	// etcd); a plan that sets none of its ranges is DefaultIPv6Plan.
	// Unused otherwise.
	IPAM6 ipam.Config `json:"ipam6"`
	// IPAMStore selects the durable IPAM store: "bolt" (default) or
	// "etcd".
	IPAMStore string `json:"ipamStore"`
	// Services selects the built-in service renderer: "nat44" (default:
	// render/svcnat onto VPP's NAT44-ED, IPv4 only), "cnat"
	// (render/svccnat onto VPP's cnat: both families, Maglev by the
	// vswitchkit.io/lb annotation, hostPorts, the source NAT of pod
	// traffic leaving the cluster) or "none" (the caller renders services
	// with its own renderer, see Agent.AddServiceRenderer).
	Services string `json:"services"`
	// PodInterfaceType is the default pod interface type ("tap",
	// "af_packet", "memif"); a pod's annotation overrides it. Default:
	// af_packet (works on every host).
	PodInterfaceType podiface.Type `json:"podInterfaceType"`
	// CNISocket is the pod server's unix socket. Default:
	// cniserver.DefaultSocketPath.
	CNISocket string `json:"cniSocket"`
	// Uplink is this node's interface towards the other nodes: an
	// af_packet host interface or an interface VPP has (a DPDK NIC), with
	// the node-interconnect address (default: IPAM's for this node's ID).
	Uplink nodeconn.Uplink `json:"uplink"`
	// HostInterconnect is VPP's side of the link to the host's network
	// stack (af_packet on a veth end, or a tap); none if neither is set.
	HostInterconnect nodeconn.HostInterconnect `json:"hostInterconnect"`
	// BGP configures the BGP speaker.
	BGP BGPConfig `json:"bgp"`
	// Policy configures NetworkPolicy enforcement.
	Policy PolicyConfig `json:"policy"`
	// HealingDelay and MaxHealingDelay tune the loop's healing backoff.
	// Defaults: the controller's (1s, 1m).
	HealingDelay    time.Duration `json:"healingDelay"`
	MaxHealingDelay time.Duration `json:"maxHealingDelay"`
	// LocalFallbackDelay is how long the watcher and nodesync wait for
	// etcd at start-up before they start from local state. Default: 5s.
	LocalFallbackDelay time.Duration `json:"localFallbackDelay"`
	// StopTimeout is how long Agent.Run waits for one stage of its
	// shutdown (see Agent.Run) before it stops the next stage anyway.
	// Default: 10s.
	StopTimeout time.Duration `json:"stopTimeout"`
}

// PolicyConfig configures NetworkPolicy enforcement (package policy,
// rendered by render/aclpolicy onto VPP's ACL plugin).
type PolicyConfig struct {
	// Disabled turns NetworkPolicy enforcement off: every pod is open,
	// whatever the policies say. Default: enforced.
	Disabled bool `json:"disabled"`
}

// BGPConfig configures the agent's BGP speaker. Peers and ASNs come from
// the BGP configuration in the cluster state: a v1 peering policy (the
// router ID and listening port from the node's annotations) or the v2
// objects (see package bgp).
type BGPConfig struct {
	// Disabled turns the BGP control plane off.
	Disabled bool `json:"disabled"`
	// ListenAddresses are the addresses the speaker listens on when the
	// node annotates a local port. Default: all.
	ListenAddresses []netip.Addr `json:"listenAddresses"`
	// IPv4 and IPv6 are this node's addresses for next hops (and router
	// ID). Default: the VPP-side addresses nodesync publishes, else the
	// node's InternalIP.
	IPv4 netip.Addr `json:"ipv4"`
	IPv6 netip.Addr `json:"ipv6"`
	// StatusInterval is how often the node's BGP status is read and, when
	// it changed, published under /vswitchkit/bgpstatus/<node> in etcd
	// (package bgp/bgpstatus). Default: 2s.
	StatusInterval time.Duration `json:"statusInterval"`
}

// withDefaults fills in the defaults and reports every bad field.
func (c Config) withDefaults() (Config, error) {
	var errs []error
	if err := kubemodel.ValidateName(c.NodeName); err != nil {
		errs = append(errs, fmt.Errorf("nodeName: %w", err))
	}
	if c.StateDir == "" {
		c.StateDir = "/var/lib/vswitchkit"
	} else if !filepath.IsAbs(c.StateDir) {
		errs = append(errs, fmt.Errorf("stateDir: %q is not an absolute path", c.StateDir))
	}
	if c.KubeStatePrefix == "" {
		c.KubeStatePrefix = kubemodel.DefaultPrefix
	}
	if c.ExternalConfigPrefix == "" {
		c.ExternalConfigPrefix = "/vswitchkit/config/" + c.NodeName + "/"
	}
	switch c.IPAMStore {
	case "":
		c.IPAMStore = StoreBolt
	case StoreBolt, StoreEtcd:
	default:
		errs = append(errs, fmt.Errorf("ipamStore: %q is neither %q nor %q", c.IPAMStore, StoreBolt, StoreEtcd))
	}
	switch c.Services {
	case "":
		c.Services = ServicesNAT44
	case ServicesNAT44, ServicesCnat, ServicesNone:
	default:
		errs = append(errs, fmt.Errorf("services: %q is none of %q, %q and %q", c.Services, ServicesNAT44, ServicesCnat, ServicesNone))
	}
	switch c.IPFamily {
	case "":
		c.IPFamily = IPv4
	case IPv4, DualStack:
	case IPv6:
		c.IPAM = withIPv6Defaults(c.IPAM)
		if c.Services == ServicesNAT44 {
			errs = append(errs, fmt.Errorf("services: %q translates IPv4 only: an %q cluster needs %q (or %q)", ServicesNAT44, IPv6, ServicesCnat, ServicesNone))
		}
	default:
		errs = append(errs, fmt.Errorf("ipFamily: %q is none of %q, %q and %q", c.IPFamily, IPv4, IPv6, DualStack))
	}
	errs = append(errs, checkPlanFamily("ipam", c.IPAM, c.IPFamily == IPv6)...)
	if c.IPFamily == IPv6 && c.Services == ServicesCnat {
		errs = append(errs, checkHairpin("ipam", c.IPAM))
	}
	if c.IPFamily == DualStack {
		c.IPAM6 = withIPv6Defaults(c.IPAM6)
		errs = append(errs, checkPlanFamily("ipam6", c.IPAM6, true)...)
		if c.Services == ServicesCnat {
			errs = append(errs, checkHairpin("ipam6", c.IPAM6))
		}
		if c.IPAM6.ExternalIPAM && c.IPAM6.NodeName == "" {
			c.IPAM6.NodeName = c.NodeName
		}
	}
	if c.PodInterfaceType == podiface.Default {
		c.PodInterfaceType = podiface.AfPacket
	} else if _, err := podiface.ParseType(string(c.PodInterfaceType)); err != nil {
		errs = append(errs, fmt.Errorf("podInterfaceType: %w", err))
	}
	if c.CNISocket != "" && !filepath.IsAbs(c.CNISocket) {
		errs = append(errs, fmt.Errorf("cniSocket: %q is not an absolute path", c.CNISocket))
	}
	if c.StopTimeout < 0 {
		errs = append(errs, fmt.Errorf("stopTimeout: %v is negative", c.StopTimeout))
	} else if c.StopTimeout == 0 {
		c.StopTimeout = 10 * time.Second
	}
	if c.IPAM.ExternalIPAM && c.IPAM.NodeName == "" {
		c.IPAM.NodeName = c.NodeName // this node's object carries the pod CIDR
	}
	for _, d := range []struct {
		field string
		d     time.Duration
	}{{"healingDelay", c.HealingDelay}, {"maxHealingDelay", c.MaxHealingDelay}, {"localFallbackDelay", c.LocalFallbackDelay},
		{"bgp.statusInterval", c.BGP.StatusInterval}} {
		if d.d < 0 {
			errs = append(errs, fmt.Errorf("%s: %v is negative", d.field, d.d))
		}
	}
	for i, a := range c.BGP.ListenAddresses {
		if !a.IsValid() {
			errs = append(errs, fmt.Errorf("bgp.listenAddresses[%d] is not a valid address", i))
		}
	}
	if c.BGP.IPv4.IsValid() && !c.BGP.IPv4.Is4() {
		errs = append(errs, fmt.Errorf("bgp.ipv4: %v is not an IPv4 address", c.BGP.IPv4))
	}
	if c.BGP.IPv6.IsValid() && !c.BGP.IPv6.Is6() {
		errs = append(errs, fmt.Errorf("bgp.ipv6: %v is not an IPv6 address", c.BGP.IPv6))
	}
	return c, errors.Join(errs...)
}

func (c Config) statePath(name string) string { return filepath.Join(c.StateDir, name) }

func discard(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}

// Validate reports every invalid field of c, the IPAM plan included, each
// named by its JSON name (the keys of the daemon's configuration file,
// e.g. "ipam.podSubnetCIDR"); nil if c is valid. It does no I/O. Open
// validates the same way.
func (c Config) Validate() error {
	d, err := c.withDefaults()
	errs := []error{err}
	ipamCfg := d.IPAM
	if ipamCfg.ExternalIPAM {
		ipamCfg.EventLoop = noLoop{} // Open sets the loop
	}
	if _, err := ipam.New(ipam.NodeIDFunc(func() uint32 { return 0 }), ipamCfg); err != nil {
		errs = append(errs, ipamFieldErrors("ipam", err))
	}
	if d.IPFamily == DualStack {
		ipam6 := d.IPAM6
		if ipam6.ExternalIPAM {
			ipam6.EventLoop = noLoop{}
		}
		if _, err := ipam.New(ipam.NodeIDFunc(func() uint32 { return 0 }), ipam6); err != nil {
			errs = append(errs, ipamFieldErrors("ipam6", err))
		}
	}
	return errors.Join(errs...)
}

// noLoop stands in for the event loop when the IPAM plan is validated.
type noLoop struct{}

func (noLoop) PushEvent(controller.Event) error { return errors.New("no event loop") }

// ipamFieldErrors renames the fields of ipam's ConfigErrors to their JSON
// names under "<field>." (the plan's own JSON name: "ipam" or "ipam6").
func ipamFieldErrors(field string, err error) error {
	var out []error
	var walk func(error)
	walk = func(err error) {
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				walk(e)
			}
			return
		}
		var ce *ipam.ConfigError
		if !errors.As(err, &ce) {
			out = append(out, fmt.Errorf("%s: %w", field, err))
			return
		}
		name := field + "." + jsonName(reflect.TypeFor[ipam.Config](), ce.Field)
		if ce.Value != "" {
			out = append(out, fmt.Errorf("%s: %s: %s", name, ce.Value, ce.Reason))
		} else {
			out = append(out, fmt.Errorf("%s: %s", name, ce.Reason))
		}
	}
	walk(err)
	return errors.Join(out...)
}

// jsonName returns the JSON name of the struct field named field of t, or
// field itself if it has none.
func jsonName(t reflect.Type, field string) string {
	f, ok := t.FieldByName(field)
	if !ok {
		return field
	}
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	if name == "" || name == "-" {
		return field
	}
	return name
}
