package vppdriver

import (
	"cmp"
	"fmt"
	"net/netip"
	"strings"

	"go.fd.io/govpp/api"
	"go.fd.io/govpp/binapi/af_packet"
	interfaces "go.fd.io/govpp/binapi/interface"
	"go.fd.io/govpp/binapi/interface_types"
	"go.fd.io/govpp/binapi/ip_types"
	"go.fd.io/govpp/binapi/memif"
	"go.fd.io/govpp/binapi/tapv2"
	"go.fd.io/govpp/binapi/vxlan"

	"github.com/vswitchkit/vswitchkit/internal/vppconv"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppmodel"
)

// ifaceType is the one place that says, for one interface type, how its
// creation-time fields (ifaceLink) map to the model, to VPP's create and
// delete requests, and back from what VPP reports. Parsing a committed
// value (parseInterface), the canonical message (ifaceVal.message), the
// create and delete ops and the readback all go through ifaceTypes.
type ifaceType struct {
	// devType is the interface_dev_type VPP reports for the type.
	devType string
	// parse fills l from the type's link message of m.
	parse func(m *vppmodel.Interface, l *ifaceLink) error
	// message sets the type's link message of m from l.
	message func(l *ifaceLink, m *vppmodel.Interface)
	// read fills l from what VPP reports of the interface, taking from
	// want (the driver's record) what VPP does not report. false: VPP's
	// interface is not one the driver would have created (it is
	// re-created).
	read func(vi *vppIface, want, l *ifaceLink) bool
	// create returns the request that creates the interface (decapNext:
	// see op.decapNext); nil for a type that is adopted, not created.
	create func(d *Driver, m *ifaceVal, decapNext uint32) (api.Message, error)
	// delete returns the request that deletes the interface and the
	// retvals that mean it is gone already; nil for a type that is
	// released, not deleted.
	delete func(sw uint32, l *ifaceLink) (api.Message, []int32)
}

// vppIface is what VPP reports of one interface: its details and what the
// dumps of its type say about it (nil or empty where they say nothing).
type vppIface struct {
	details *interfaces.SwInterfaceDetails
	afpHost string
	tap     *tapv2.SwInterfaceTapV2Details
	memif   *memifInfo
	tunnel  *vxlanInfo
}

var ifaceTypes = map[vppmodel.Interface_Type]*ifaceType{
	vppmodel.Interface_LOOPBACK: {
		devType: "Loopback",
		parse:   func(*vppmodel.Interface, *ifaceLink) error { return nil },
		message: func(*ifaceLink, *vppmodel.Interface) {},
		read:    func(*vppIface, *ifaceLink, *ifaceLink) bool { return true },
		create: func(_ *Driver, m *ifaceVal, _ uint32) (api.Message, error) {
			return &interfaces.CreateLoopback{MacAddress: m.mac}, nil
		},
		delete: func(sw uint32, _ *ifaceLink) (api.Message, []int32) {
			return &interfaces.DeleteLoopback{SwIfIndex: interface_types.InterfaceIndex(sw)}, []int32{rvInvalidSwIfIndex}
		},
	},

	vppmodel.Interface_AF_PACKET: {
		devType: "af-packet",
		parse: func(m *vppmodel.Interface, l *ifaceLink) error {
			l.afpHost = m.GetAfPacket().GetHostIfName()
			return nil
		},
		message: func(l *ifaceLink, m *vppmodel.Interface) { m.AfPacket = &vppmodel.AfPacketLink{HostIfName: l.afpHost} },
		read: func(vi *vppIface, _, l *ifaceLink) bool {
			l.afpHost = vi.afpHost
			return true
		},
		create: func(_ *Driver, m *ifaceVal, _ uint32) (api.Message, error) {
			// Checksum offload as VPP's CLI sets it by default: a veth hands
			// VPP packets whose checksum the kernel left to the "hardware";
			// without it VPP forwards them with bad checksums and TCP fails.
			return &af_packet.AfPacketCreateV3{
				Mode: af_packet.AF_PACKET_API_MODE_ETHERNET, HostIfName: m.link.afpHost,
				HwAddr: m.mac, UseRandomHwAddr: !m.hasMAC,
				NumRxQueues: 1, NumTxQueues: 1,
				Flags: af_packet.AF_PACKET_API_FLAG_CKSUM_GSO,
			}, nil
		},
		delete: func(_ uint32, l *ifaceLink) (api.Message, []int32) {
			return &af_packet.AfPacketDelete{HostIfName: l.afpHost}, []int32{rvSyscallError1}
		},
	},

	vppmodel.Interface_TAP: {
		devType: "virtio",
		parse:   func(m *vppmodel.Interface, l *ifaceLink) error { return parseTap(m.GetTap(), l) },
		message: func(l *ifaceLink, m *vppmodel.Interface) {
			t := &vppmodel.TapLink{HostIfName: l.tapHost, RxRingSize: l.tapRx, TxRingSize: l.tapTx, HostNamespace: l.tapNS}
			if l.tapHasMAC {
				t.HostMacAddress = l.tapHostMAC.String()
			}
			for _, p := range []netip.Prefix{l.tapIP4, l.tapIP6} {
				if p.IsValid() {
					t.HostIpAddresses = append(t.HostIpAddresses, p.String())
				}
			}
			for _, a := range []netip.Addr{l.tapGW4, l.tapGW6} {
				if a.IsValid() {
					t.HostGateways = append(t.HostGateways, a.String())
				}
			}
			m.Tap = t
		},
		read: readTap,
		create: func(d *Driver, m *ifaceVal, _ uint32) (api.Message, error) {
			return tapMsg(m, d.cfg.TagPrefix), nil
		},
		delete: func(sw uint32, _ *ifaceLink) (api.Message, []int32) {
			return &tapv2.TapDeleteV2{SwIfIndex: interface_types.InterfaceIndex(sw)}, []int32{rvInvalidSwIfIndex}
		},
	},

	vppmodel.Interface_EXISTING: {
		devType: "", // any: an adopted interface is whatever VPP has
		parse: func(m *vppmodel.Interface, l *ifaceLink) error {
			l.existing = m.GetExisting().GetVppName()
			return nil
		},
		message: func(l *ifaceLink, m *vppmodel.Interface) { m.Existing = &vppmodel.ExistingLink{VppName: l.existing} },
		read: func(vi *vppIface, _, l *ifaceLink) bool {
			l.existing = vi.details.InterfaceName
			return true
		},
		// Adopted, not created (ifaceCreate looks it up by name); released,
		// not deleted (ifaceRelease).
	},

	vppmodel.Interface_VXLAN_TUNNEL: {
		devType: "VXLAN",
		parse: func(m *vppmodel.Interface, l *ifaceLink) error {
			x := m.GetVxlan()
			src, err := netip.ParseAddr(x.GetSrcAddress())
			if err != nil {
				return err
			}
			dst, err := netip.ParseAddr(x.GetDstAddress())
			if err != nil {
				return err
			}
			l.vxSrc, l.vxDst, l.vni, l.encapVrf = src, dst, x.GetVni(), x.GetEncapVrf()
			switch x.GetPayload() {
			case vppmodel.VxlanLink_PAYLOAD_IPV4:
			case vppmodel.VxlanLink_PAYLOAD_IPV6:
				l.vxPayload6 = true
			default:
				l.vxPayload6 = src.Is6()
			}
			return nil
		},
		message: func(l *ifaceLink, m *vppmodel.Interface) {
			payload := vppmodel.VxlanLink_PAYLOAD_IPV4
			if l.vxPayload6 {
				payload = vppmodel.VxlanLink_PAYLOAD_IPV6
			}
			m.Vxlan = &vppmodel.VxlanLink{SrcAddress: l.vxSrc.String(), DstAddress: l.vxDst.String(), Vni: l.vni,
				EncapVrf: l.encapVrf, Payload: payload}
		},
		read: func(vi *vppIface, _, l *ifaceLink) bool {
			t := vi.tunnel
			if t == nil {
				return false
			}
			l.vxSrc, l.vxDst, l.vni, l.encapVrf = t.src, t.dst, t.vni, t.encapVrf
			l.vxPayload6, l.vxBadDecap = t.payload6, t.badDecap
			return true
		},
		create: func(_ *Driver, m *ifaceVal, decapNext uint32) (api.Message, error) {
			return vxlanMsg(&m.link, true, decapNext), nil
		},
		delete: func(_ uint32, l *ifaceLink) (api.Message, []int32) {
			return vxlanMsg(l, false, noIndex), []int32{rvNoSuchEntry}
		},
	},

	vppmodel.Interface_MEMIF: {
		devType: "memif",
		parse: func(m *vppmodel.Interface, l *ifaceLink) error {
			x := m.GetMemif()
			l.memifMaster, l.memifID, l.memifSecret = x.GetMaster(), x.GetId(), x.GetSecret()
			l.memifSocket = cmp.Or(x.GetSocketFilename(), defaultMemifSocket)
			l.memifRing, l.memifBuf = cmp.Or(x.GetRingSize(), defaultMemifRing), cmp.Or(x.GetBufferSize(), defaultMemifBuffer)
			return nil
		},
		message: func(l *ifaceLink, m *vppmodel.Interface) {
			m.Memif = &vppmodel.MemifLink{Master: l.memifMaster, Id: l.memifID, SocketFilename: l.memifSocket,
				RingSize: l.memifRing, BufferSize: l.memifBuf, Secret: l.memifSecret}
		},
		read: func(vi *vppIface, want, l *ifaceLink) bool {
			l.memifSocket = defaultMemifSocket
			if x := vi.memif; x != nil {
				l.memifMaster, l.memifID, l.memifSocket = x.master, x.id, cmp.Or(x.socket, defaultMemifSocket)
			}
			// VPP does not report the secret, and reports the running ring
			// and buffer sizes (negotiated with the peer; 1 and 0 without
			// one), not the configured ones: take them from the driver's
			// record.
			l.memifSecret = want.memifSecret
			l.memifRing, l.memifBuf = cmp.Or(want.memifRing, defaultMemifRing), cmp.Or(want.memifBuf, defaultMemifBuffer)
			return true
		},
		create: func(d *Driver, m *ifaceVal, _ uint32) (api.Message, error) {
			l := &m.link
			sock, ok := d.memifSockets[l.memifSocket]
			if !ok {
				return nil, fmt.Errorf("memif socket %q is not registered", l.memifSocket)
			}
			role := memif.MEMIF_ROLE_API_SLAVE
			if l.memifMaster {
				role = memif.MEMIF_ROLE_API_MASTER
			}
			return &memif.MemifCreateV2{Role: role, Mode: memif.MEMIF_MODE_API_ETHERNET, RxQueues: 1, TxQueues: 1,
				ID: l.memifID, SocketID: sock, RingSize: l.memifRing, BufferSize: uint16(l.memifBuf),
				HwAddr: m.mac, Secret: l.memifSecret}, nil
		},
		delete: func(sw uint32, _ *ifaceLink) (api.Message, []int32) {
			return &memif.MemifDelete{SwIfIndex: interface_types.InterfaceIndex(sw)}, []int32{rvInvalidSwIfIndex}
		},
	},
}

// ifaceTypeOfDev returns the type of an owned interface from the device
// type VPP reports (TYPE_UNSPECIFIED, which is re-created, if the driver
// creates no such interfaces). An adopted interface is EXISTING whatever
// its device type.
func ifaceTypeOfDev(devType string, adopted bool) vppmodel.Interface_Type {
	if adopted {
		return vppmodel.Interface_EXISTING
	}
	for typ, t := range ifaceTypes {
		if t.devType == devType {
			return typ
		}
	}
	return vppmodel.Interface_TYPE_UNSPECIFIED
}

// ifaceFromVPP returns the value of the owned interface vi, named name,
// as VPP reports it. want is the driver's record of the interface (its
// desired or applied value; empty if none): VPP does not report some
// fields (a tap's host gateways, a memif's secret and configured sizes)
// and reports others only when the value sets them (a tap's host name,
// namespace and MAC, the MAC of the interface). The value is not
// finished: its addresses, VRF bindings and unnumbered source are added
// by the caller.
func ifaceFromVPP(vi *vppIface, name string, adopted bool, want *ifaceVal) *ifaceVal {
	r := vi.details
	v := &ifaceVal{name: name, enabled: r.Flags&interface_types.IF_STATUS_API_FLAG_ADMIN_UP != 0,
		typ: ifaceTypeOfDev(r.InterfaceDevType, adopted)}
	if t := ifaceTypes[v.typ]; t == nil || !t.read(vi, &want.link, &v.link) {
		v.typ, v.link = vppmodel.Interface_TYPE_UNSPECIFIED, ifaceLink{} // not ours to keep: re-created
	}
	if want.hasMAC {
		v.hasMAC, v.mac = true, r.L2Address
	}
	return v
}

// readTap reads a tap's host side back. VPP reports the host name,
// namespace and MAC it chose even when the value leaves them to it: they
// are taken only where the value sets them.
func readTap(vi *vppIface, want, l *ifaceLink) bool {
	l.tapRx, l.tapTx = defaultTapRing, defaultTapRing
	if t := vi.tap; t != nil {
		l.tapRx, l.tapTx = uint32(cmp.Or(t.RxRingSz, defaultTapRing)), uint32(cmp.Or(t.TxRingSz, defaultTapRing))
		if want.tapHost != "" {
			l.tapHost = t.HostIfName
		}
		if want.tapNS != "" {
			l.tapNS = t.HostNamespace
			if netnsPath(t.HostNamespace) == netnsPath(want.tapNS) {
				l.tapNS = want.tapNS // a name and its path are one namespace
			}
		}
		if want.tapHasMAC {
			l.tapHostMAC, l.tapHasMAC = t.HostMacAddr, true
		}
		if t.HostIP4Prefix.Len != 0 || t.HostIP4Prefix.Address != (ip_types.IP4Address{}) {
			l.tapIP4 = netip.PrefixFrom(netip.AddrFrom4(t.HostIP4Prefix.Address), int(t.HostIP4Prefix.Len))
		}
		if t.HostIP6Prefix.Len != 0 || t.HostIP6Prefix.Address != (ip_types.IP6Address{}) {
			l.tapIP6 = netip.PrefixFrom(netip.AddrFrom16(t.HostIP6Prefix.Address), int(t.HostIP6Prefix.Len))
		}
	}
	// VPP does not report the host gateways: take them from the driver's
	// record.
	l.tapGW4, l.tapGW6 = want.tapGW4, want.tapGW6
	return true
}

// parseTap fills the tap attributes of l.
func parseTap(t *vppmodel.TapLink, l *ifaceLink) error {
	l.tapHost, l.tapNS = t.GetHostIfName(), t.GetHostNamespace()
	l.tapRx, l.tapTx = cmp.Or(t.GetRxRingSize(), defaultTapRing), cmp.Or(t.GetTxRingSize(), defaultTapRing)
	if s := t.GetHostMacAddress(); s != "" {
		mac, err := vppmodel.ParseMAC(s)
		if err != nil {
			return err
		}
		l.tapHostMAC, l.tapHasMAC = mac, true
	}
	for _, a := range t.GetHostIpAddresses() {
		p, err := netip.ParsePrefix(a)
		if err != nil {
			return err
		}
		if p.Addr().Is4() {
			l.tapIP4 = p
		} else {
			l.tapIP6 = p
		}
	}
	for _, g := range t.GetHostGateways() {
		a, err := netip.ParseAddr(g)
		if err != nil {
			return err
		}
		if a.Is4() {
			l.tapGW4 = a
		} else {
			l.tapGW6 = a
		}
	}
	return nil
}

// tapMsg builds tap_create_v3 with every default set explicitly.
func tapMsg(m *ifaceVal, tagPrefix string) *tapv2.TapCreateV3 {
	l := &m.link
	req := &tapv2.TapCreateV3{
		ID: noIndex, UseRandomMac: !m.hasMAC, MacAddress: m.mac,
		NumRxQueues: 1, NumTxQueues: 1,
		RxRingSz: uint16(l.tapRx), TxRingSz: uint16(l.tapTx),
		HostIfNameSet: l.tapHost != "", HostIfName: l.tapHost,
		HostNamespaceSet: l.tapNS != "", HostNamespace: l.tapNS,
		HostMacAddrSet: l.tapHasMAC, HostMacAddr: l.tapHostMAC,
		Tag: tagPrefix + m.name,
	}
	if p := l.tapIP4; p.IsValid() {
		req.HostIP4PrefixSet = true
		req.HostIP4Prefix = ip_types.IP4AddressWithPrefix{Address: p.Addr().As4(), Len: uint8(p.Bits())}
	}
	if p := l.tapIP6; p.IsValid() {
		req.HostIP6PrefixSet = true
		req.HostIP6Prefix = ip_types.IP6AddressWithPrefix{Address: p.Addr().As16(), Len: uint8(p.Bits())}
	}
	if a := l.tapGW4; a.IsValid() {
		req.HostIP4GwSet, req.HostIP4Gw = true, a.As4()
	}
	if a := l.tapGW6; a.IsValid() {
		req.HostIP6GwSet, req.HostIP6Gw = true, a.As16()
	}
	return req
}

// netnsPath is the path VPP opens for a tap's host namespace (a name is
// looked up under /var/run/netns).
func netnsPath(ns string) string {
	if strings.HasPrefix(ns, "/") {
		return ns
	}
	return "/var/run/netns/" + ns
}

// vxlanMsg builds vxlan_add_del_tunnel_v3 with every default set
// explicitly (GoVPP does not apply binapi defaults).
func vxlanMsg(l *ifaceLink, add bool, decapNext uint32) *vxlan.VxlanAddDelTunnelV3 {
	return &vxlan.VxlanAddDelTunnelV3{
		IsAdd: add, Instance: noIndex,
		SrcAddress: vppconv.Address(l.vxSrc), DstAddress: vppconv.Address(l.vxDst),
		SrcPort: vxlanPort, DstPort: vxlanPort, McastSwIfIndex: interface_types.InterfaceIndex(noIndex),
		EncapVrfID: l.encapVrf, DecapNextIndex: decapNext, Vni: l.vni, IsL3: true,
	}
}
