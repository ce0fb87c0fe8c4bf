//go:build linux

package linuxpod

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"

	"github.com/containernetworking/plugins/pkg/netlinksafe"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/vswitchkit/vswitchkit/cniserver"
)

// Linux implements cniserver.Linux with netlink. It is safe for concurrent
// use; it keeps no state: every call opens netlink sockets in the
// namespaces it works in and closes them before returning.
type Linux struct{}

// New returns the netlink implementation.
func New() *Linux { return &Linux{} }

var _ cniserver.Linux = (*Linux)(nil)

// handle is a netlink handle in one namespace.
type handle struct {
	netlinksafe.Handle
	nsFd int // -1 for the host namespace
	ns   ns.NetNS
}

func (h *handle) close() {
	h.Close()
	if h.ns != nil {
		_ = h.ns.Close()
	}
}

// open returns a handle in the namespace at path ("" = the host's, i.e.
// the caller's).
func open(path string) (*handle, error) {
	if path == "" {
		h, err := netlinksafe.NewHandle()
		if err != nil {
			return nil, fmt.Errorf("netlink: %w", err)
		}
		return &handle{Handle: h, nsFd: -1}, nil
	}
	n, err := ns.GetNS(path)
	if err != nil {
		var notExist ns.NSPathNotExistErr
		var notNS ns.NSPathNotNSErr
		if errors.As(err, &notExist) || errors.As(err, &notNS) || errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%w: %s: %v", cniserver.ErrNetnsNotFound, path, err)
		}
		return nil, fmt.Errorf("open netns %s: %w", path, err)
	}
	h, err := netlinksafe.NewHandleAt(netns.NsHandle(n.Fd()))
	if err != nil {
		_ = n.Close()
		return nil, fmt.Errorf("netlink in %s: %w", path, err)
	}
	return &handle{Handle: h, nsFd: int(n.Fd()), ns: n}, nil
}

// linkByName returns the link, or an error wrapping ErrLinkNotFound.
func (h *handle) linkByName(name string) (netlink.Link, error) {
	l, err := h.LinkByName(name)
	if err != nil {
		var nf netlink.LinkNotFoundError
		if errors.As(err, &nf) {
			return nil, fmt.Errorf("%w: %s", cniserver.ErrLinkNotFound, name)
		}
		return nil, fmt.Errorf("link %s: %w", name, err)
	}
	return l, nil
}

// EnsureVeth implements cniserver.Linux.
func (*Linux) EnsureVeth(ctx context.Context, v cniserver.Veth) (net.HardwareAddr, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	host, err := open("")
	if err != nil {
		return nil, err
	}
	defer host.close()
	var pod *handle
	if v.Netns != "" {
		if pod, err = open(v.Netns); err != nil {
			return nil, err
		}
		defer pod.close()
	}
	for attempt := 0; ; attempt++ {
		hl, err := host.linkByName(v.HostName)
		switch {
		case errors.Is(err, cniserver.ErrLinkNotFound):
			if hl, err = createVeth(host, pod, v); err != nil {
				return nil, err
			}
		case err != nil:
			return nil, err
		}
		ok, err := placePeer(host, pod, hl, v)
		if err != nil {
			return nil, err
		}
		if !ok {
			// The host end's peer is neither here nor in the pod's
			// namespace: a leftover of another namespace. Re-create.
			if attempt > 0 {
				return nil, fmt.Errorf("veth %s: peer not found after re-creating the pair", v.HostName)
			}
			if err := host.LinkDel(hl); err != nil && !isNotFound(err) {
				return nil, fmt.Errorf("delete stale veth %s: %w", v.HostName, err)
			}
			continue
		}
		if v.MTU > 0 && hl.Attrs().MTU != v.MTU {
			if err := host.LinkSetMTU(hl, v.MTU); err != nil {
				return nil, fmt.Errorf("veth %s: set MTU: %w", v.HostName, err)
			}
		}
		if err := host.LinkSetUp(hl); err != nil {
			return nil, fmt.Errorf("veth %s: set up: %w", v.HostName, err)
		}
		return hl.Attrs().HardwareAddr, nil
	}
}

// createVeth creates the pair in the host namespace, after checking that
// IfName is free in the pod's.
func createVeth(host, pod *handle, v cniserver.Veth) (netlink.Link, error) {
	if pod != nil {
		if _, err := pod.linkByName(v.IfName); err == nil {
			return nil, fmt.Errorf("%w: %s in %s", cniserver.ErrLinkExists, v.IfName, v.Netns)
		} else if !errors.Is(err, cniserver.ErrLinkNotFound) {
			return nil, err
		}
	}
	// A pod end left alone in the host namespace cannot exist (the pair
	// dies together), but a foreign link may use the name.
	if _, err := host.linkByName(v.PeerName); err == nil {
		return nil, fmt.Errorf("%w: %s in the host namespace", cniserver.ErrLinkExists, v.PeerName)
	}
	la := netlink.NewLinkAttrs()
	la.Name = v.HostName
	la.MTU = v.MTU
	veth := &netlink.Veth{LinkAttrs: la, PeerName: v.PeerName}
	if pod != nil {
		// Create the pod end right in the pod's namespace under its final
		// name: moving a link between namespaces costs the kernel an RCU
		// grace period or two (about 10 ms).
		veth.PeerName, veth.PeerNamespace = v.IfName, netlink.NsFd(pod.nsFd)
	}
	if v.MTU > 0 {
		veth.PeerMTU = uint32(v.MTU)
	}
	if err := host.LinkAdd(veth); err != nil {
		if errors.Is(err, unix.EEXIST) {
			return nil, fmt.Errorf("%w: veth %s/%s: %v", cniserver.ErrLinkExists, v.HostName, veth.PeerName, err)
		}
		return nil, fmt.Errorf("create veth %s/%s: %w", v.HostName, veth.PeerName, err)
	}
	return host.linkByName(v.HostName)
}

// placePeer moves the pod end into the pod's namespace as IfName if it is
// still in the host namespace. It reports false if the host end's peer is
// in neither place.
func placePeer(host, pod *handle, hl netlink.Link, v cniserver.Veth) (bool, error) {
	peerIndex := hl.Attrs().ParentIndex
	if pl, err := host.linkByName(v.PeerName); err == nil && pl.Attrs().Index == peerIndex {
		if pod == nil {
			return true, nil
		}
		if _, err := pod.linkByName(v.IfName); err == nil {
			return false, fmt.Errorf("%w: %s in %s", cniserver.ErrLinkExists, v.IfName, v.Netns)
		}
		if err := host.LinkSetNsFd(pl, pod.nsFd); err != nil {
			return false, fmt.Errorf("move %s into %s: %w", v.PeerName, v.Netns, err)
		}
	} else if pod == nil {
		return false, nil
	}
	// The pod end is in the pod's namespace: under its temporary name
	// (just moved, or moved before a crash) or already renamed.
	if pl, err := pod.linkByName(v.PeerName); err == nil {
		if pl.Attrs().ParentIndex != hl.Attrs().Index {
			return false, fmt.Errorf("%w: %s in %s is not the peer of %s", cniserver.ErrLinkExists, v.PeerName, v.Netns, v.HostName)
		}
		if _, err := pod.linkByName(v.IfName); err == nil {
			return false, fmt.Errorf("%w: %s in %s", cniserver.ErrLinkExists, v.IfName, v.Netns)
		}
		if err := pod.LinkSetName(pl, v.IfName); err != nil {
			return false, fmt.Errorf("rename %s to %s in %s: %w", v.PeerName, v.IfName, v.Netns, err)
		}
		return true, nil
	}
	pl, err := pod.linkByName(v.IfName)
	if errors.Is(err, cniserver.ErrLinkNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if _, isVeth := pl.(*netlink.Veth); !isVeth || pl.Attrs().ParentIndex != hl.Attrs().Index {
		return false, fmt.Errorf("%w: %s in %s is not the peer of %s", cniserver.ErrLinkExists, v.IfName, v.Netns, v.HostName)
	}
	return true, nil
}

// ConfigureLink implements cniserver.Linux.
func (*Linux) ConfigureLink(ctx context.Context, nsPath string, cfg cniserver.LinkConfig) (net.HardwareAddr, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	h, err := open(nsPath)
	if err != nil {
		return nil, err
	}
	defer h.close()
	l, err := h.linkByName(cfg.Name)
	if err != nil {
		return nil, err
	}
	name := cfg.Name
	if len(cfg.MAC) > 0 && l.Attrs().HardwareAddr.String() != cfg.MAC.String() {
		if err := h.LinkSetHardwareAddr(l, cfg.MAC); err != nil {
			return nil, fmt.Errorf("%s: set MAC %s: %w", name, cfg.MAC, err)
		}
	}
	if cfg.MTU > 0 && l.Attrs().MTU != cfg.MTU {
		if err := h.LinkSetMTU(l, cfg.MTU); err != nil {
			return nil, fmt.Errorf("%s: set MTU %d: %w", name, cfg.MTU, err)
		}
	}
	if err := h.LinkSetUp(l); err != nil {
		return nil, fmt.Errorf("%s: set up: %w", name, err)
	}

	// Addresses: exactly cfg.Addresses (IPv6 link-local ones stay). Old
	// ones are removed first: a new address added next to an old one of
	// the same subnet would be a secondary one, deleted with the primary.
	// Removing the last address of a subnet flushes its routes and
	// neighbor entries; they are (re-)added below.
	have, err := h.AddrList(l, netlink.FAMILY_ALL)
	if err != nil {
		return nil, fmt.Errorf("%s: list addresses: %w", name, err)
	}
	want := map[netip.Prefix]bool{}
	for _, p := range cfg.Addresses {
		want[p] = true
	}
	for _, a := range have {
		p, ok := prefixOf(a.IPNet)
		if !ok || p.Addr().Is6() && p.Addr().IsLinkLocalUnicast() {
			continue
		}
		if want[p] {
			delete(want, p)
			continue
		}
		if err := h.AddrDel(l, &a); err != nil && !isNotFound(err) {
			return nil, fmt.Errorf("%s: delete address %s: %w", name, p, err)
		}
	}
	for _, p := range cfg.Addresses {
		if !want[p] {
			continue
		}
		addr := &netlink.Addr{IPNet: ipNet(p)}
		if p.Addr().Is6() {
			addr.Flags = unix.IFA_F_NODAD
		}
		if err := h.AddrReplace(l, addr); err != nil {
			return nil, fmt.Errorf("%s: add address %s: %w", name, p, err)
		}
	}

	// A gateway outside the link's prefixes needs a route to it first.
	var onLink []netip.Addr
	for _, r := range cfg.Routes {
		if r.Gateway.IsValid() && !covered(cfg.Addresses, r.Gateway) && !containsAddr(onLink, r.Gateway) {
			onLink = append(onLink, r.Gateway)
		}
	}
	for _, gw := range onLink {
		rt := &netlink.Route{LinkIndex: l.Attrs().Index, Scope: netlink.SCOPE_LINK, Dst: ipNet(netip.PrefixFrom(gw, gw.BitLen()))}
		if err := h.RouteReplace(rt); err != nil {
			return nil, fmt.Errorf("%s: route to gateway %s: %w", name, gw, err)
		}
	}
	for _, r := range cfg.Routes {
		rt := &netlink.Route{LinkIndex: l.Attrs().Index, Family: family(r.Dst.Addr())}
		if r.Dst.Bits() > 0 {
			rt.Dst = ipNet(r.Dst)
		}
		if r.Gateway.IsValid() {
			rt.Gw = r.Gateway.AsSlice()
		} else {
			rt.Scope = netlink.SCOPE_LINK
		}
		if err := h.RouteReplace(rt); err != nil {
			return nil, fmt.Errorf("%s: route %s: %w", name, r, err)
		}
	}
	for _, n := range cfg.Neighbors {
		ne := &netlink.Neigh{LinkIndex: l.Attrs().Index, Family: family(n.IP), State: netlink.NUD_PERMANENT,
			IP: n.IP.AsSlice(), HardwareAddr: n.MAC}
		if err := h.NeighSet(ne); err != nil {
			return nil, fmt.Errorf("%s: neighbor %s: %w", name, n, err)
		}
	}
	if l, err = h.linkByName(name); err != nil {
		return nil, err
	}
	return l.Attrs().HardwareAddr, nil
}

// DeleteLink implements cniserver.Linux.
func (*Linux) DeleteLink(ctx context.Context, nsPath, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	h, err := open(nsPath)
	if errors.Is(err, cniserver.ErrNetnsNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	defer h.close()
	l, err := h.linkByName(name)
	if errors.Is(err, cniserver.ErrLinkNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := h.LinkDel(l); err != nil && !isNotFound(err) {
		return fmt.Errorf("delete %s: %w", name, err)
	}
	return nil
}

// InspectLink implements cniserver.Linux.
func (*Linux) InspectLink(ctx context.Context, nsPath, name string) (cniserver.LinkState, error) {
	if err := ctx.Err(); err != nil {
		return cniserver.LinkState{}, err
	}
	h, err := open(nsPath)
	if err != nil {
		return cniserver.LinkState{}, err
	}
	defer h.close()
	l, err := h.linkByName(name)
	if err != nil {
		return cniserver.LinkState{}, err
	}
	la := l.Attrs()
	st := cniserver.LinkState{Name: la.Name, MAC: la.HardwareAddr, MTU: la.MTU, Up: la.Flags&net.FlagUp != 0}
	addrs, err := h.AddrList(l, netlink.FAMILY_ALL)
	if err != nil {
		return st, fmt.Errorf("%s: list addresses: %w", name, err)
	}
	for _, a := range addrs {
		if p, ok := prefixOf(a.IPNet); ok && !(p.Addr().Is6() && p.Addr().IsLinkLocalUnicast()) {
			st.Addresses = append(st.Addresses, p)
		}
	}
	routes, err := h.RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{LinkIndex: la.Index, Table: unix.RT_TABLE_MAIN},
		netlink.RT_FILTER_OIF|netlink.RT_FILTER_TABLE)
	if err != nil {
		return st, fmt.Errorf("%s: list routes: %w", name, err)
	}
	for _, r := range routes {
		if r.Protocol == unix.RTPROT_KERNEL || r.Type != unix.RTN_UNICAST {
			continue
		}
		rt := cniserver.Route{}
		if r.Dst != nil {
			p, ok := prefixOf(r.Dst)
			if !ok {
				continue
			}
			rt.Dst = p
		} else if r.Family == unix.AF_INET6 {
			rt.Dst = netip.PrefixFrom(netip.IPv6Unspecified(), 0)
		} else {
			rt.Dst = netip.PrefixFrom(netip.IPv4Unspecified(), 0)
		}
		if gw, ok := netip.AddrFromSlice(r.Gw); ok {
			rt.Gateway = gw.Unmap()
		}
		if rt.Dst.Addr().Is6() && rt.Dst.Addr().IsLinkLocalUnicast() {
			continue
		}
		st.Routes = append(st.Routes, rt)
	}
	neighs, err := h.NeighList(la.Index, netlink.FAMILY_ALL)
	if err != nil {
		return st, fmt.Errorf("%s: list neighbors: %w", name, err)
	}
	for _, n := range neighs {
		ip, ok := netip.AddrFromSlice(n.IP)
		if !ok || n.State&netlink.NUD_PERMANENT == 0 {
			continue
		}
		st.Neighbors = append(st.Neighbors, cniserver.Neighbor{IP: ip.Unmap(), MAC: n.HardwareAddr})
	}
	st.Sort()
	return st, nil
}

func prefixOf(n *net.IPNet) (netip.Prefix, bool) {
	if n == nil {
		return netip.Prefix{}, false
	}
	a, ok := netip.AddrFromSlice(n.IP)
	if !ok {
		return netip.Prefix{}, false
	}
	ones, bits := n.Mask.Size()
	a = a.Unmap()
	if bits == 128 && a.Is4() {
		ones -= 96
	}
	return netip.PrefixFrom(a, ones), true
}

func ipNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

func family(a netip.Addr) int {
	if a.Is4() {
		return netlink.FAMILY_V4
	}
	return netlink.FAMILY_V6
}

func covered(ps []netip.Prefix, a netip.Addr) bool {
	for _, p := range ps {
		if p.Masked().Contains(a) {
			return true
		}
	}
	return false
}

func containsAddr(as []netip.Addr, a netip.Addr) bool {
	for _, b := range as {
		if a == b {
			return true
		}
	}
	return false
}

func isNotFound(err error) bool {
	var nf netlink.LinkNotFoundError
	return errors.As(err, &nf) || errors.Is(err, unix.ENODEV) || errors.Is(err, unix.ENOENT) ||
		errors.Is(err, unix.EADDRNOTAVAIL) || errors.Is(err, unix.ESRCH)
}
