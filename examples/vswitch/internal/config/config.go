package config

import (
	"log/slog"
	"net/netip"

	"github.com/vswitchkit/vswitchkit/ipam"
)

// Modes of the VPP connection.
const (
	VPPSocket = "socket" // a real VPP over its binary-API socket
	VPPSim    = "sim"    // the in-process VPP stand-in (vppsim)
)

// Implementations of the pod side of pod interfaces.
const (
	LinuxNetlink = "netlink" // the host's network namespaces, through netlink (root)
	LinuxFake    = "fake"    // simulated links (cniservertest.FakeLinux); only with vpp.mode sim
)

// Log formats.
const (
	LogText = "text"
	LogJSON = "json"
)

// Defaults.
const (
	DefaultStateDir      = "/var/lib/vswitchkit"
	DefaultVPPSocket     = "/run/vpp/api.sock"
	DefaultHTTPListen    = "127.0.0.1:9482"
	DefaultEtcdEndpoint  = "127.0.0.1:2379"
	DefaultDialTimeout   = 5 * Duration(1e9)
	EnvEtcdPassword      = "ETCD_PASSWORD"
	defaultIPAMStoreKind = "bolt"
)

// Config is the daemon's configuration. The zero value is not valid
// (NodeName is required); every other field documents its default.
type Config struct {
	// NodeName is this node's Kubernetes node name. Required.
	NodeName string `json:"nodeName"`
	// StateDir holds the agent's local state (etcd mirror, node ID, IPAM
	// store, CNI attachments). Default: /var/lib/vswitchkit.
	StateDir string `json:"stateDir"`

	// Etcd is the cluster-wide etcd.
	Etcd Etcd `json:"etcd"`

	// VPP is the VPP to program.
	VPP VPP `json:"vpp"`
	// Linux does the pod side of pod interfaces: "netlink" (default; the
	// node's network namespaces, needs root) or "fake" (simulated links;
	// only with vpp.mode sim, for demos and tests without root).
	Linux string `json:"linux"`

	// IPAM is the cluster's address plan (ipam.Config; the same on every
	// node). Defaults: ipam's (pods 10.1.0.0/16 with a /24 per node,
	// services 10.96.0.0/12, ...).
	IPAM ipam.Config `json:"ipam"`
	// IPFamily is the cluster's IP family: "ipv4" (default), "ipv6" (ipam
	// is an IPv6 plan; needs services "cnat") or "dual" (ipam the IPv4
	// plan, ipam6 the IPv6 one: pods get an address of each family).
	IPFamily string `json:"ipFamily"`
	// IPAM6 is the IPv6 address plan with ipFamily "dual" (ipam.Config;
	// the same on every node). Default: pods fd00:1::/104 with a /120 per
	// node, services fd00:96::/108, ... (agent.DefaultIPv6Plan). Unused
	// otherwise.
	IPAM6 ipam.Config `json:"ipam6"`
	// Services is the service renderer: "nat44" (default; NAT44-ED, IPv4
	// only), "cnat" (VPP's cnat: both families, Maglev by the
	// vswitchkit.io/lb annotation, hostPorts) or "none".
	Services string `json:"services"`
	// IPAMStore is where pod IP allocations are persisted: "bolt"
	// (default; a file in StateDir) or "etcd".
	IPAMStore string `json:"ipamStore"`
	// PodInterfaceType is the default interface type of pods: "af_packet"
	// (default; a veth pair), "tap" (needs /dev/vhost-net) or "memif"; a
	// pod's annotation overrides it.
	PodInterfaceType string `json:"podInterfaceType"`
	// CNISocket is the unix socket the CNI plugin calls. Default:
	// /run/vswitchkit/cni.sock.
	CNISocket string `json:"cniSocket"`

	// Uplink is this node's interface towards the other nodes. Default:
	// none (the mesh uses the node IP configured elsewhere).
	Uplink Uplink `json:"uplink"`
	// HostInterconnect is VPP's side of the link to the host's network
	// stack. Default: none.
	HostInterconnect HostInterconnect `json:"hostInterconnect"`

	// BGP configures the BGP speaker.
	BGP BGP `json:"bgp"`

	// HTTP serves metrics, health and debug views.
	HTTP HTTP `json:"http"`
	// Log configures the logs (on standard error).
	Log Log `json:"log"`

	// KubeStatePrefix is the etcd prefix of the Kubernetes state (as the
	// reflector writes it). Default: /vswitchkit/.
	KubeStatePrefix string `json:"kubeStatePrefix"`
	// ExternalConfigPrefix is this node's external-configuration prefix.
	// Default: /vswitchkit/config/<nodeName>/.
	ExternalConfigPrefix string `json:"externalConfigPrefix"`
	// HealingDelay and MaxHealingDelay tune the event loop's healing
	// backoff. Defaults: 1s and 1m.
	HealingDelay    Duration `json:"healingDelay"`
	MaxHealingDelay Duration `json:"maxHealingDelay"`
	// LocalFallbackDelay is how long the agent waits for etcd at start
	// before it starts from its local state. Default: 5s.
	LocalFallbackDelay Duration `json:"localFallbackDelay"`
	// StopTimeout bounds each stage of the shutdown. Default: 10s.
	StopTimeout Duration `json:"stopTimeout"`
}

// Etcd is the connection to the cluster-wide etcd.
type Etcd struct {
	// Endpoints are the client URLs: host:port, http://host:port or
	// https://host:port. Default: 127.0.0.1:2379.
	Endpoints []string `json:"endpoints"`
	// CAFile is a PEM file of the CAs that sign the server certificates;
	// setting CAFile, CertFile or KeyFile enables TLS. Default: the
	// system's CAs when TLS is on.
	CAFile string `json:"caFile"`
	// CertFile and KeyFile are the PEM client certificate and key (mutual
	// TLS); set both or neither.
	CertFile string `json:"certFile"`
	KeyFile  string `json:"keyFile"`
	// ServerName is checked against the server certificate. Default: the
	// endpoint's host.
	ServerName string `json:"serverName"`
	// Username is the etcd user; the password is Password, the content of
	// PasswordFile, or $ETCD_PASSWORD (in this order). Default: none (no
	// authentication, or the user from the client certificate).
	Username     string `json:"username"`
	Password     string `json:"password"`
	PasswordFile string `json:"passwordFile"`
	// DialTimeout bounds one connection (and login) attempt. Default: 5s.
	DialTimeout Duration `json:"dialTimeout"`
}

// VPP is the VPP the daemon programs.
type VPP struct {
	// Mode is "socket" (default; a real VPP) or "sim" (the in-process
	// stand-in).
	Mode string `json:"mode"`
	// APISocket is VPP's binary-API socket (socksvr socket-name).
	// Default: /run/vpp/api.sock.
	APISocket string `json:"apiSocket"`
}

// Uplink is this node's interface towards the other nodes: set at most
// one of AfPacketHostIf and VPPName.
type Uplink struct {
	// Name is the logical name of the interface. Default: "uplink".
	Name string `json:"name"`
	// AfPacketHostIf is the Linux interface VPP attaches to with
	// af_packet, e.g. "eth1".
	AfPacketHostIf string `json:"afPacketHostIf"`
	// VPPName is an interface VPP has (a DPDK NIC), e.g.
	// "GigabitEthernet0/8/0".
	VPPName string `json:"vppName"`
	// Address is the node-interconnect address with its prefix length.
	// Default: IPAM's for this node's ID.
	Address netip.Prefix `json:"address"`
	// MACAddress of the af_packet interface. Default: 06:00 and the node
	// ID.
	MACAddress string `json:"macAddress"`
}

// HostInterconnect is VPP's side of the link to the host: set at most one
// of AfPacketHostIf and TapHostIfName.
type HostInterconnect struct {
	// Name is the logical name of the interface. Default: "vpp-host".
	Name string `json:"name"`
	// AfPacketHostIf is the host end of a veth pair VPP attaches to.
	AfPacketHostIf string `json:"afPacketHostIf"`
	// TapHostIfName makes VPP create a tap with this Linux name (needs
	// /dev/vhost-net).
	TapHostIfName string `json:"tapHostIfName"`
	// MACAddress of VPP's side. Default: 06:01 and the node ID.
	MACAddress string `json:"macAddress"`
}

// BGP configures the BGP speaker. The peers, the local ASN and what is
// advertised come from the BGP peering policy that selects this node (in
// the cluster state); the router ID and the listening port from this
// node's annotation bgp.vswitchkit.io/virtual-router.<ASN> (router-id=...,
// local-port=...). The daemon sets what belongs to the node alone.
type BGP struct {
	// Disabled turns BGP off.
	Disabled bool `json:"disabled"`
	// ListenAddresses are the addresses the speaker listens on when the
	// annotation names a local port. Default: all.
	ListenAddresses []netip.Addr `json:"listenAddresses"`
	// IPv4 is this node's IPv4 address for next hops and, unless the
	// annotation sets one, the router ID; IPv6 its IPv6 next hop.
	// Defaults: the VPP-side addresses node sync publishes, else the
	// node's InternalIP.
	IPv4 netip.Addr `json:"ipv4"`
	IPv6 netip.Addr `json:"ipv6"`
}

// HTTP is the daemon's HTTP endpoint.
type HTTP struct {
	// Listen is the host:port of /metrics, /healthz, /readyz and
	// /debug/*. Default: 127.0.0.1:9482 (the debug views show pods and
	// addresses: listen on a node address only where that is wanted).
	Listen string `json:"listen"`
}

// Log configures the daemon's logs.
type Log struct {
	// Format is "text" (default) or "json".
	Format string `json:"format"`
	// Level is "debug", "info" (default), "warn" or "error".
	Level string `json:"level"`
}

// LogLevel returns the configured level (Info for an invalid one, which
// Validate reports).
func (l Log) LogLevel() slog.Level {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(l.Level)); err != nil {
		return slog.LevelInfo
	}
	return lvl
}
