package ipam_test

import (
	"encoding/json"
	"errors"
	"net"
	"net/netip"
	"testing"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/controllertest"
	"github.com/vswitchkit/vswitchkit/ipam"
	"github.com/vswitchkit/vswitchkit/ipam/ipamtest"
)

// checkPlan validates cfg with New and, if it is accepted, checks the
// address plan of node id against the invariants every valid configuration
// must satisfy.
func checkPlan(t *testing.T, cfg ipam.Config, id uint32) {
	cfg.EventLoop = &controllertest.EventRecorder{}
	cfg.Logger = nil
	cfg.Store = nil
	i, err := ipam.New(ipamtest.NewNodeID(id), cfg)
	if err != nil {
		if !errors.Is(err, ipam.ErrInvalidConfig) {
			t.Fatalf("New: error not wrapping ErrInvalidConfig: %v", err)
		}
		return
	}
	// Ranges never overlap.
	all := []*net.IPNet{i.PodSubnetAllNodes(), i.HostInterconnectSubnetAllNodes(), i.ServiceNetwork()}
	if _, n, err := i.VxlanIPAddress(1); err == nil {
		all = append(all, n)
	}
	if _, n, err := i.NodeIPAddress(1); err == nil {
		all = append(all, n)
	}
	for a := range all {
		for b := a + 1; b < len(all); b++ {
			if prefixOf(all[a]).Overlaps(prefixOf(all[b])) {
				t.Fatalf("ranges %s and %s overlap", all[a], all[b])
			}
		}
	}

	err = i.Resync(controller.NewDBResync(), controller.NewKubeStateData(), 1, controllertest.NewTxn())
	if err != nil {
		if !errors.Is(err, ipam.ErrInvalidNodeID) && !errors.Is(err, ipam.ErrNotReady) {
			t.Fatalf("Resync: unexpected error: %v", err)
		}
		return
	}
	host := prefixOf(i.HostInterconnectSubnetThisNode())
	if !prefixOf(i.HostInterconnectSubnetAllNodes()).Contains(host.Addr()) {
		t.Fatalf("host subnet %s outside all-nodes range", host)
	}
	hostIPs := []net.IP{i.HostInterconnectIPInVPP(), i.HostInterconnectIPInLinux(), i.NatLoopbackIP()}
	seen := map[netip.Addr]bool{}
	for _, ip := range hostIPs {
		checkUnicastIn(t, addrOf(ip), host, "host link")
		if seen[addrOf(ip)] {
			t.Fatalf("host link address %s used twice", ip)
		}
		seen[addrOf(ip)] = true
	}
	if ip, n, err := i.NodeIPAddress(id); err == nil {
		checkUnicastIn(t, addrOf(ip), prefixOf(n), "node IP")
		if cfg.DefaultGateway.IsValid() && addrOf(ip) == cfg.DefaultGateway {
			t.Fatalf("node IP %s is the default gateway", ip)
		}
	} else if !errors.Is(err, ipam.ErrNoNodeInterconnect) {
		t.Fatalf("NodeIPAddress after a successful resync: %v", err)
	}
	ip, n, err := i.VxlanIPAddress(id)
	if err != nil {
		t.Fatalf("VxlanIPAddress after a successful resync: %v", err)
	}
	checkUnicastIn(t, addrOf(ip), prefixOf(n), "VXLAN IP")

	if cfg.ExternalIPAM {
		return
	}
	podNet := prefixOf(i.PodSubnetThisNode())
	if !prefixOf(i.PodSubnetAllNodes()).Contains(podNet.Addr()) {
		t.Fatalf("pod subnet %s outside all-nodes range", podNet)
	}
	gw := addrOf(i.PodGatewayIP())
	checkUnicastIn(t, gw, podNet, "pod gateway")
	pods := map[netip.Addr]bool{}
	for k := range 5 {
		a, err := i.AllocatePodAddr(podID{Namespace: "f", Name: string(rune('a' + k))})
		if errors.Is(err, ipam.ErrPoolExhausted) {
			break
		}
		if err != nil {
			t.Fatalf("AllocatePodAddr: %v", err)
		}
		checkUnicastIn(t, a, podNet, "pod IP")
		if a == gw || pods[a] {
			t.Fatalf("pod IP %s is the gateway or a duplicate", a)
		}
		pods[a] = true
	}
}

func checkUnicastIn(t *testing.T, a netip.Addr, p netip.Prefix, what string) {
	t.Helper()
	p = p.Masked()
	if !p.Contains(a) || a == p.Addr() {
		t.Fatalf("%s %s not a host address of %s", what, a, p)
	}
	// The last (broadcast) address of p.
	b := p.Addr().AsSlice()
	for bit := p.Bits(); bit < p.Addr().BitLen(); bit++ {
		b[bit/8] |= 0x80 >> (bit % 8)
	}
	if last, _ := netip.AddrFromSlice(b); a == last {
		t.Fatalf("%s %s is the broadcast address of %s", what, a, p)
	}
}

func prefixOf(n *net.IPNet) netip.Prefix {
	a := addrOf(n.IP)
	ones, _ := n.Mask.Size()
	return netip.PrefixFrom(a, ones)
}

func addrOf(ip net.IP) netip.Addr {
	a, ok := netip.AddrFromSlice(ip)
	if !ok {
		panic("bad net.IP " + ip.String())
	}
	return a.Unmap()
}

func FuzzConfigJSON(f *testing.F) {
	f.Add([]byte(`{}`), uint32(5))
	f.Add([]byte(`{"podSubnetCIDR":"1.2.128.0/17","podSubnetOneNodePrefixLen":29}`), uint32(1))
	f.Add([]byte(`{"nodeInterconnectCIDR":"3.4.5.192/26","vxlanCIDR":"4.5.6.192/26"}`), uint32(5))
	f.Add([]byte(`{"podSubnetCIDR":"fe10:f00d::/90","podSubnetOneNodePrefixLen":120}`), uint32(5))
	f.Add([]byte(`{"singleCIDR":"10.128.0.0/14"}`), uint32(7))
	f.Add([]byte(`{"singleCIDR":"fd00::/64","nodeInterconnectDHCP":true}`), uint32(9))
	f.Add([]byte(`{"defaultGateway":"192.168.16.3"}`), uint32(3))
	f.Add([]byte(`{"externalIPAM":true,"nodeName":"n"}`), uint32(2))
	f.Add([]byte(`{"vppHostSubnetCIDR":"fd00::/64","vppHostSubnetOneNodePrefixLen":125}`), uint32(1<<20))
	f.Fuzz(func(t *testing.T, data []byte, id uint32) {
		var cfg ipam.Config
		if err := json.Unmarshal(data, &cfg); err != nil {
			return
		}
		checkPlan(t, cfg, id)
	})
}

func FuzzConfigFields(f *testing.F) {
	f.Add("10.1.0.0/16", 24, "172.30.0.0/16", 24, "192.168.16.0/24", "192.168.30.0/24", "10.96.0.0/12", "", "", uint32(5))
	f.Add("fe10:f00d::/90", 120, "", 0, "3.4.5.192/26", "4.5.6.192/26", "", "", "3.4.5.193", uint32(5))
	f.Add("", 0, "", 0, "", "", "", "10.0.0.0/8", "", uint32(100))
	f.Add("", 0, "", 0, "", "", "fd00:96::/108", "fd00::/64", "", uint32(1))
	f.Add("10.0.0.0/30", 31, "10.0.0.0/29", 29, "10.0.0.0/24", "10.0.0.4/30", "10.0.0.8/29", "", "10.0.0.1", uint32(1))
	f.Fuzz(func(t *testing.T, pod string, podLen int, host string, hostLen int, ic, vx, svc, single, gw string, id uint32) {
		parse := func(s string) netip.Prefix {
			p, err := netip.ParsePrefix(s)
			if err != nil {
				return netip.Prefix{}
			}
			return p
		}
		g, _ := netip.ParseAddr(gw)
		cfg := ipam.Config{
			PodSubnetCIDR: parse(pod), PodSubnetOneNodePrefixLen: podLen,
			VPPHostSubnetCIDR: parse(host), VPPHostSubnetOneNodePrefixLen: hostLen,
			NodeInterconnectCIDR: parse(ic), VXLANCIDR: parse(vx), ServiceCIDR: parse(svc),
			SingleCIDR: parse(single), DefaultGateway: g,
		}
		checkPlan(t, cfg, id)
	})
}
