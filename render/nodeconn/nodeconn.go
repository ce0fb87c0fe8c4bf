package nodeconn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strconv"
	"sync"

	"google.golang.org/protobuf/proto"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/nodesync"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppmodel"
)

// Nodes tells the handler this node's ID and every node of the cluster.
// *nodesync.NodeSync satisfies it. Both methods are called on the event
// loop goroutine, from Resync and Update.
type Nodes interface {
	GetNodeID() uint32
	GetAllNodes() nodesync.Nodes
}

// Publisher publishes this node's VPP-side addresses to the other nodes
// (they build their tunnels to them). *nodesync.NodeSync satisfies it. It
// is called from Resync, on the event loop goroutine; it must write only
// on a real change (nodesync does), as every resync calls it.
//
// A Publisher that also has PublishNodeIPsContext (as *nodesync.NodeSync
// does) is called with the context of the resync instead
// (controller.ContextOf), so that its write ends with the event.
type Publisher interface {
	PublishNodeIPs(addresses nodesync.IPsWithNetworks, version nodesync.IPVersion) error
}

// contextPublisher is the optional form of Publisher that takes the
// event's context.
type contextPublisher interface {
	PublishNodeIPsContext(ctx context.Context, addresses nodesync.IPsWithNetworks, version nodesync.IPVersion) error
}

// IPAM is the part of the IPAM API the handler uses (*ipam.IPAM satisfies
// it): this node's addresses and the per-node subnets of the others. It is
// called on the event loop goroutine.
type IPAM interface {
	NodeAddr(nodeID uint32) (netip.Prefix, error)
	VxlanAddr(nodeID uint32) (netip.Prefix, error)
	HostInterconnectAddrInVPP() netip.Addr
	HostInterconnectSubnetThisNodePrefix() netip.Prefix
	HostInterconnectSubnetOtherNodePrefix(nodeID uint32) (netip.Prefix, error)
	PodSubnetOtherNodePrefix(nodeID uint32) (netip.Prefix, error)
}

// ErrNotReady is returned (wrapped) while this node has no node ID or IPAM
// has not computed this node's addresses yet: the handler keeps what it
// configured before and the loop heals with a later resync.
var ErrNotReady = errors.New("nodeconn: this node's ID or addresses are not known yet")

// Handler is the node connectivity event handler: it puts this node's
// uplink, VPP-host interconnect and VXLAN loopback, and a routed VXLAN
// mesh to every other node, as vppdriver/vppmodel values into the loop's
// transaction. See the package documentation.
//
// Handler is safe for concurrent use: its controller.EventHandler methods
// run on the event loop goroutine; [Handler.Tunnels] may be called from
// any goroutine.
type Handler struct {
	nodes Nodes
	pub   Publisher
	ipam  IPAM
	cfg   Config
	log   *slog.Logger

	mu    sync.Mutex               // guards the fields below
	self  *self                    // nil until computed
	own   controller.KeyValuePairs // this node's values
	peers map[string]*peer         // by node name
	exits []string                 // ExitInterfaces' answer; nil: to compute (the peers changed)
}

// self is what the handler knows about this node.
type self struct {
	id      uint32
	nodeIP  netip.Prefix // address with the interconnect's prefix length
	vxlanIP netip.Addr
	vxlan4  bool // the VXLAN subnet is IPv4
	hostIP  netip.Prefix
	// The second family's (Config.DualStack), invalid without.
	nodeIP2, hostIP2 netip.Prefix
	vxlanIP2         netip.Addr
}

// peer is what the handler configured for another node.
type peer struct {
	id     uint32
	values controller.KeyValuePairs
}

var _ controller.EventHandler = (*Handler)(nil)

// New returns a handler. nodes and addrs are required; pub may be nil
// (this node's addresses are then not published). New does no I/O.
func New(nodes Nodes, pub Publisher, addrs IPAM, cfg Config) (*Handler, error) {
	if nodes == nil || addrs == nil {
		return nil, errors.New("nodeconn: nodes and IPAM are required")
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Handler{nodes: nodes, pub: pub, ipam: addrs, cfg: cfg, log: cfg.Logger.With(slog.String("component", "nodeconn")),
		peers: map[string]*peer{}}, nil
}

// String returns "nodeconn".
func (h *Handler) String() string { return "nodeconn" }

// HandlesEvent selects resyncs and nodesync.NodeUpdate events.
func (h *Handler) HandlesEvent(ev controller.Event) bool {
	if _, ok := ev.(*nodesync.NodeUpdate); ok {
		return true
	}
	m := ev.Method()
	return m == controller.FullResync || m == controller.UpstreamResync
}

// Resync puts this node's interfaces and the mesh to every other node
// that has an ID and a published address of the underlay's family, and
// publishes this node's node IP. If this node's addresses are not known
// (see [ErrNotReady]), it puts what it configured before and returns the
// error, so that the commit removes nothing; before its first successful
// resync it aborts the event instead (controller.AbortEventError: nothing
// is committed, the loop resyncs again soon), so that a starting agent
// does not remove what VPP holds.
func (h *Handler) Resync(_ controller.Event, _ controller.KubeStateData, _ int, txn controller.ResyncOperations) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	s, err := h.computeSelf()
	if err == nil {
		var own controller.KeyValuePairs
		if own, err = h.ownValues(s); err == nil {
			h.self, h.own = s, own
		}
	}
	if err != nil {
		if h.self == nil {
			// Nothing known yet (an agent that starts): abort rather than
			// let the commit remove what VPP holds from before.
			return controller.NewAbortEventError(err)
		}
		h.putAllLocked(txn)
		return err
	}
	var errs []error
	if err := h.publish(controller.ContextOf(txn), s); err != nil {
		errs = append(errs, err)
	}
	h.peers = map[string]*peer{}
	h.exits = nil
	for name, n := range h.nodes.GetAllNodes() {
		if p := h.peerOf(s, n); p != nil {
			h.peers[name] = p
		}
	}
	h.putAllLocked(txn)
	return errors.Join(errs...)
}

func (h *Handler) putAllLocked(txn controller.ResyncOperations) {
	controller.PutAll(txn, h.own)
	for _, p := range h.peers {
		controller.PutAll(txn, p.values)
	}
}

// Update applies a NodeUpdate of another node: its keys are replaced by
// the new ones, and only keys whose value changed are put (a node whose
// address changed moves its tunnels; its neighbors and routes are not
// touched). NodeUpdates of this node are ignored.
func (h *Handler) Update(ev controller.Event, txn controller.UpdateOperations) (string, error) {
	nu, ok := ev.(*nodesync.NodeUpdate)
	if !ok {
		return "", nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.self == nil {
		s, err := h.computeSelf()
		if err != nil {
			return "", err
		}
		h.self = s
	}
	if nu.NewState != nil && nu.NewState.ID == h.self.id {
		return "", nil
	}
	old := h.peers[nu.NodeName]
	var next *peer
	if nu.NewState != nil {
		next = h.peerOf(h.self, nu.NewState)
	}
	var oldVals, newVals controller.KeyValuePairs
	if old != nil {
		oldVals = old.values
	}
	if next != nil {
		newVals = next.values
		h.peers[nu.NodeName] = next
	} else {
		delete(h.peers, nu.NodeName)
	}
	h.exits = updateExits(h.exits, peerInterfaces(old), peerInterfaces(next))
	changed := controller.ReplaceAll(txn, oldVals, newVals)
	if changed == 0 {
		return "", nil
	}
	return fmt.Sprintf("node %s: %d key(s) changed", nu.NodeName, changed), nil
}

// Revert does nothing: the handler handles BestEffort events only.
func (h *Handler) Revert(controller.Event) error { return nil }

// Tunnels returns the logical names of the tunnel interfaces to the node
// of that name (one per payload family; none if the node is unknown or
// has no address yet).
func (h *Handler) Tunnels(node string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	p := h.peers[node]
	if p == nil {
		return nil
	}
	var out []string
	for k, v := range p.values {
		if i, ok := v.(*vppmodel.Interface); ok && k == vppmodel.InterfaceKey(i.GetName()) {
			out = append(out, i.GetName())
		}
	}
	slices.Sort(out)
	return out
}

// ExitInterfaces returns the logical names of the interfaces on which
// traffic leaves this node's VPP for other nodes and the host: the uplink
// and the host interconnect (when configured) and every tunnel, sorted.
// The slice is shared: read-only. It is computed once and then kept up
// to date as peers join, move and leave (the ACL renderer asks on every
// event; at 5000 nodes walking every peer's keys each time cost 60% of
// the agent's CPU in node joins).
func (h *Handler) ExitInterfaces() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.exits == nil {
		h.exits = h.exitInterfacesLocked()
	}
	return h.exits
}

func (h *Handler) exitInterfacesLocked() []string {
	out := []string{}
	if h.cfg.Uplink.AfPacketHostIf != "" || h.cfg.Uplink.VPPName != "" {
		out = append(out, h.cfg.Uplink.Name)
	}
	if h.cfg.HostInterconnect.AfPacketHostIf != "" || h.cfg.HostInterconnect.TapHostIfName != "" {
		out = append(out, h.cfg.HostInterconnect.Name)
	}
	for _, p := range h.peers {
		out = append(out, peerInterfaces(p)...)
	}
	slices.Sort(out)
	return out
}

// peerInterfaces returns the names of the interfaces among p's keys (its
// tunnel); none for nil.
func peerInterfaces(p *peer) []string {
	if p == nil {
		return nil
	}
	var out []string
	for k, v := range p.values {
		if i, ok := v.(*vppmodel.Interface); ok && k == vppmodel.InterfaceKey(i.GetName()) {
			out = append(out, i.GetName())
		}
	}
	return out
}

// updateExits returns the sorted exits with the names in gone removed and
// those in added inserted: a new slice if anything changed (the old one
// may be held by a caller of ExitInterfaces), exits itself if not; nil
// stays nil (not computed yet).
func updateExits(exits, gone, added []string) []string {
	if exits == nil || slices.Equal(gone, added) {
		return exits
	}
	out := slices.Clone(exits)
	for _, name := range gone {
		if i, ok := slices.BinarySearch(out, name); ok {
			out = slices.Delete(out, i, i+1)
		}
	}
	for _, name := range added {
		i, _ := slices.BinarySearch(out, name)
		out = slices.Insert(out, i, name)
	}
	return out
}

// nodeIPOf returns this node's address (with the interconnect's prefix
// length) once its ID is id.
func (h *Handler) nodeIPOf(id uint32) (netip.Prefix, error) {
	if h.cfg.Uplink.Address.IsValid() {
		return h.cfg.Uplink.Address, nil
	}
	p, err := h.ipam.NodeAddr(id)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("nodeconn: node IP of node %d: %w", id, err)
	}
	return p, nil
}

// NodeIPs returns the VPP addresses the handler publishes for this node
// once its ID is id (Config.Uplink's address, or the node-interconnect
// address IPAM computes from id), for nodesync.Config.InitialNodeIPs:
// nodesync then writes them with the claim of the ID, and the handler's
// publication at the start-up resync finds them in place.
func (h *Handler) NodeIPs(id uint32) (nodesync.IPsWithNetworks, error) {
	p, err := h.nodeIPOf(id)
	if err != nil {
		return nil, err
	}
	return nodesync.IPsWithNetworks{{Address: p.Addr(), Network: p.Masked()}}, nil
}

// computeSelf reads this node's ID and addresses.
func (h *Handler) computeSelf() (*self, error) {
	id := h.nodes.GetNodeID()
	if id == 0 {
		return nil, fmt.Errorf("%w: no node ID", ErrNotReady)
	}
	nodeIP, err := h.nodeIPOf(id)
	if err != nil {
		return nil, err
	}
	s := &self{id: id, nodeIP: nodeIP}
	vp, err := h.ipam.VxlanAddr(id)
	if err != nil {
		return nil, fmt.Errorf("nodeconn: VXLAN IP of node %d: %w", id, err)
	}
	s.vxlanIP, s.vxlan4 = vp.Addr(), vp.Addr().Is4()
	if h.cfg.HostInterconnect.AfPacketHostIf != "" || h.cfg.HostInterconnect.TapHostIfName != "" {
		ip, network := h.ipam.HostInterconnectAddrInVPP(), h.ipam.HostInterconnectSubnetThisNodePrefix()
		if !ip.IsValid() || !network.IsValid() {
			return nil, fmt.Errorf("%w: no VPP-host interconnect address", ErrNotReady)
		}
		s.hostIP = netip.PrefixFrom(ip, network.Bits())
	}
	if d := h.cfg.DualStack; d != nil {
		p, err := d.NodeAddr(id)
		if err != nil {
			return nil, fmt.Errorf("nodeconn: node IP of node %d (the second family's): %w", id, err)
		}
		if p.Addr().Is4() == s.nodeIP.Addr().Is4() {
			return nil, fmt.Errorf("nodeconn: Config.DualStack's node IP %s is of the first family's (%s)", p, s.nodeIP)
		}
		s.nodeIP2 = p
		if vp, err := d.VxlanAddr(id); err == nil && vp.Addr().Is4() != s.vxlanIP.Is4() {
			s.vxlanIP2 = vp.Addr()
		}
		if s.hostIP.IsValid() {
			ip, network := d.HostInterconnectAddrInVPP(), d.HostInterconnectSubnetThisNodePrefix()
			if !ip.IsValid() || !network.IsValid() {
				return nil, fmt.Errorf("%w: no VPP-host interconnect address of the second family", ErrNotReady)
			}
			s.hostIP2 = netip.PrefixFrom(ip, network.Bits())
		}
	}
	return s, nil
}

// addrs returns the valid prefixes of ps as strings.
func addrs(ps ...netip.Prefix) []string {
	var out []string
	for _, p := range ps {
		if p.IsValid() {
			out = append(out, p.String())
		}
	}
	return out
}

// hostPrefix returns a as a host prefix (the invalid prefix for the
// invalid address).
func hostPrefix(a netip.Addr) netip.Prefix {
	if !a.IsValid() {
		return netip.Prefix{}
	}
	return netip.PrefixFrom(a, a.BitLen())
}

// ownValues returns this node's values: uplink, VPP-host interconnect,
// VXLAN loopback and the NAT44 identity mapping for VXLAN.
func (h *Handler) ownValues(s *self) (controller.KeyValuePairs, error) {
	out := controller.KeyValuePairs{}
	var errs []error
	put := func(m proto.Message) {
		k, err := vppmodel.KeyOf(m)
		if err != nil {
			errs = append(errs, fmt.Errorf("nodeconn: %w", err)) // e.g. a bad host interface name in Config
			return
		}
		out[k] = m
	}
	up := h.cfg.Uplink
	switch {
	case up.AfPacketHostIf != "":
		put(&vppmodel.Interface{Name: up.Name, Type: vppmodel.Interface_AF_PACKET, Enabled: true, MacAddress: macOr(up.MACAddress, 0, s.id),
			AfPacket: &vppmodel.AfPacketLink{HostIfName: up.AfPacketHostIf}, IpAddresses: addrs(s.nodeIP, s.nodeIP2)})
	case up.VPPName != "":
		put(&vppmodel.Interface{Name: up.Name, Type: vppmodel.Interface_EXISTING, Enabled: true,
			Existing: &vppmodel.ExistingLink{VppName: up.VPPName}, IpAddresses: addrs(s.nodeIP, s.nodeIP2)})
	}
	hi := h.cfg.HostInterconnect
	switch {
	case hi.AfPacketHostIf != "":
		put(&vppmodel.Interface{Name: hi.Name, Type: vppmodel.Interface_AF_PACKET, Enabled: true, MacAddress: macOr(hi.MACAddress, 1, s.id),
			AfPacket: &vppmodel.AfPacketLink{HostIfName: hi.AfPacketHostIf}, IpAddresses: addrs(s.hostIP, s.hostIP2)})
	case hi.TapHostIfName != "":
		put(&vppmodel.Interface{Name: hi.Name, Type: vppmodel.Interface_TAP, Enabled: true, MacAddress: macOr(hi.MACAddress, 1, s.id),
			Tap: &vppmodel.TapLink{HostIfName: hi.TapHostIfName}, IpAddresses: addrs(s.hostIP, s.hostIP2)})
	}
	put(&vppmodel.Interface{Name: h.cfg.VxlanLoopbackName, Type: vppmodel.Interface_LOOPBACK, Enabled: true, MacAddress: macOr("", 2, s.id),
		IpAddresses: addrs(hostPrefix(s.vxlanIP), hostPrefix(s.vxlanIP2))})
	if h.cfg.NAT44 && s.nodeIP.Addr().Is4() {
		put(&vppmodel.Nat44IdentityMapping{Protocol: vppmodel.Nat44Protocol_UDP, Ip: s.nodeIP.Addr().String(), Port: vxlanPort})
	}
	return out, errors.Join(errs...)
}

const vxlanPort = 4789

// publish publishes the node IP (and no address of the other family).
func (h *Handler) publish(ctx context.Context, s *self) error {
	if h.pub == nil {
		return nil
	}
	publish := h.pub.PublishNodeIPs
	if cp, ok := h.pub.(contextPublisher); ok {
		publish = func(a nodesync.IPsWithNetworks, v nodesync.IPVersion) error {
			return cp.PublishNodeIPsContext(ctx, a, v)
		}
	}
	a := s.nodeIP
	mine := nodesync.IPsWithNetworks{{Address: a.Addr(), Network: a.Masked()}}
	v, other := nodesync.IPv4, nodesync.IPv6
	if a.Addr().Is6() {
		v, other = other, v
	}
	if err := publish(mine, v); err != nil {
		return fmt.Errorf("nodeconn: publish node IP: %w", err)
	}
	var theirs nodesync.IPsWithNetworks
	if b := s.nodeIP2; b.IsValid() {
		theirs = nodesync.IPsWithNetworks{{Address: b.Addr(), Network: b.Masked()}}
	}
	if err := publish(theirs, other); err != nil {
		return fmt.Errorf("nodeconn: publish node IP: %w", err)
	}
	return nil
}

// peerOf returns the values for another node: per payload family a
// tunnel, a static neighbor for the next hop through it, and routes to the
// node's pod and VPP-host subnets of that family. It returns nil for this
// node, a node without ID, and a node without an address of the
// underlay's family.
func (h *Handler) peerOf(s *self, n *nodesync.Node) *peer {
	if n == nil || n.ID == 0 || n.ID == s.id {
		return nil
	}
	var remote netip.Addr
	for _, a := range n.VppIPAddresses {
		if a.Address.Unmap().Is4() == s.nodeIP.Addr().Is4() {
			remote = a.Address.Unmap()
			break
		}
	}
	if !remote.IsValid() || remote == s.nodeIP.Addr() {
		return nil
	}
	var subnets []netip.Prefix
	if h.cfg.PodCIDRsFromKubernetes {
		for _, p := range n.PodCIDRs {
			if p.IsValid() {
				subnets = append(subnets, p.Masked())
			}
		}
	} else {
		for _, a := range h.ipams() {
			if p, err := a.PodSubnetOtherNodePrefix(n.ID); err == nil {
				subnets = append(subnets, p.Masked())
			} else {
				h.log.Debug("no pod subnet of node", slog.String("node", n.Name), slog.Any("error", err))
			}
		}
	}
	for _, a := range h.ipams() {
		if p, err := a.HostInterconnectSubnetOtherNodePrefix(n.ID); err == nil {
			subnets = append(subnets, p.Masked())
		} else {
			h.log.Debug("no VPP-host subnet of node", slog.String("node", n.Name), slog.Any("error", err))
		}
	}
	out := &peer{id: n.ID, values: controller.KeyValuePairs{}}
	for _, v6 := range []bool{false, true} {
		var fam []netip.Prefix
		for _, p := range subnets {
			if p.Addr().Is6() == v6 {
				fam = append(fam, p)
			}
		}
		if len(fam) == 0 {
			continue
		}
		name, vni, payload := "vxlan-"+strconv.FormatUint(uint64(n.ID), 10), h.cfg.VNI, vppmodel.VxlanLink_PAYLOAD_IPV4
		if v6 {
			name, vni, payload = "vxlan6-"+strconv.FormatUint(uint64(n.ID), 10), h.cfg.IPv6VNI, vppmodel.VxlanLink_PAYLOAD_IPV6
		}
		nh := h.nextHop(s, n.ID, v6)
		tunnel := &vppmodel.Interface{Name: name, Type: vppmodel.Interface_VXLAN_TUNNEL, Enabled: true, Unnumbered: h.cfg.VxlanLoopbackName,
			Vxlan: &vppmodel.VxlanLink{SrcAddress: s.nodeIP.Addr().String(), DstAddress: remote.String(), Vni: vni, Payload: payload}}
		out.values[vppmodel.InterfaceKey(name)] = tunnel
		if h.cfg.NAT44 && !v6 {
			// Traffic to a service backend on that node leaves through the
			// tunnel after DNAT: the tunnel is inside and outside, like the
			// VPP-host link, so that the replies are translated back.
			out.values[vppmodel.Nat44InterfaceKey(name)] = &vppmodel.Nat44Interface{Interface: name, Inside: true, Outside: true}
		}
		if h.cfg.Cnat {
			// The replies of backends on that node come in through the
			// tunnel: cnat must see them where they enter. In the POD
			// table, what leaves through it is never source-NATed as
			// "outside to outside" traffic (the host reaching a backend on
			// that node keeps its address, which the cluster routes back
			// here): VPP 26.06 applies a source-NATed connection's
			// rewrite again to the VXLAN packet that carries it, at the
			// uplink's cnat output node (the session state of the inner
			// packet survives the encapsulation), which breaks the
			// connection from its second packet on.
			out.values[vppmodel.CnatInterfaceKey(name)] = &vppmodel.CnatInterface{Interface: name, Feature: true, SnatPod: true}
		}
		out.values[vppmodel.IPNeighborKey(name, nh)] = &vppmodel.IPNeighbor{Interface: name, IpAddress: nh.String(),
			MacAddress: neighborMAC(n.ID)}
		for _, p := range fam {
			out.values[vppmodel.RouteKey(0, p)] = &vppmodel.Route{DstNetwork: p.String(),
				Paths: []*vppmodel.Path{{OutgoingInterface: name, NextHop: nh.String()}}}
		}
	}
	if len(out.values) == 0 {
		return nil
	}
	return out
}

// nextHop is the next hop of the routes through the tunnel of one payload
// family to node id: the node's VXLAN IP when the VXLAN subnet is of that
// family, otherwise a link-local address made from the ID (fe80::<id>,
// 169.254.<id/256>.<id%256>). A routed tunnel is not point-to-point in VPP:
// routes through it need a next hop, resolved by a static neighbor.
func (h *Handler) nextHop(s *self, id uint32, v6 bool) netip.Addr {
	if s.vxlan4 != v6 {
		if p, err := h.ipam.VxlanAddr(id); err == nil {
			return p.Addr()
		}
	}
	if s.vxlanIP2.IsValid() && s.vxlanIP2.Is6() == v6 {
		if p, err := h.cfg.DualStack.VxlanAddr(id); err == nil {
			return p.Addr()
		}
	}
	if v6 {
		var b [16]byte
		b[0], b[1] = 0xfe, 0x80
		b[12], b[13], b[14], b[15] = byte(id>>24), byte(id>>16), byte(id>>8), byte(id)
		return netip.AddrFrom16(b)
	}
	return netip.AddrFrom4([4]byte{169, 254, byte(id >> 8), byte(id)})
}

// macOr returns mac, or the default MAC 06:<kind>:<node ID> of an
// interface of this node.
func macOr(mac string, kind byte, id uint32) string {
	if mac != "" {
		return mac
	}
	return fmt.Sprintf("06:%02x:%02x:%02x:%02x:%02x", kind, byte(id>>24), byte(id>>16), byte(id>>8), byte(id))
}

// neighborMAC is the MAC of the static neighbor of node id (a routed
// tunnel carries no Ethernet header: it is never on the wire).
func neighborMAC(id uint32) string {
	return fmt.Sprintf("02:00:%02x:%02x:%02x:%02x", byte(id>>24), byte(id>>16), byte(id>>8), byte(id))
}

// ipams returns the IPAM and, in a dual-stack cluster, the second
// family's.
func (h *Handler) ipams() []IPAM {
	if h.cfg.DualStack != nil {
		return []IPAM{h.ipam, h.cfg.DualStack}
	}
	return []IPAM{h.ipam}
}
