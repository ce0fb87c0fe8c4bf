package cniserver

import (
	"bytes"
	"fmt"
	"net"
	"net/netip"

	"github.com/containernetworking/cni/pkg/types"
	types100 "github.com/containernetworking/cni/pkg/types/100"
)

// cniResult returns the ADD result of a connected attachment, in the
// request's cniVersion: the veth host end (af_packet), the pod's
// interfaces with their addresses (each with the gateway of its family)
// and the routes, the DNS settings of the network configuration, all
// appended to a prevResult if the plugin is chained after another.
func (s *Server) cniResult(a Attachment, r *request) ([]byte, error) {
	res := &types100.Result{CNIVersion: types100.ImplementedSpecVersion, DNS: r.conf.DNS}
	if r.conf.PrevResult != nil {
		prev, err := types100.NewResultFromResult(r.conf.PrevResult)
		if err != nil {
			return nil, types.NewError(types.ErrInvalidNetworkConfig, "cannot convert prevResult", err.Error())
		}
		res = prev
		res.CNIVersion = types100.ImplementedSpecVersion
		if len(r.conf.DNS.Nameservers)+len(r.conf.DNS.Search)+len(r.conf.DNS.Options) > 0 || r.conf.DNS.Domain != "" {
			res.DNS = r.conf.DNS
		}
	}
	routes, err := parseRoutes(a.Routes)
	if err != nil {
		return nil, err
	}
	if a.HostIfName != "" {
		res.Interfaces = append(res.Interfaces, &types100.Interface{Name: a.HostIfName, Mac: a.HostMAC, Mtu: s.cfg.MTU})
	}
	for _, pi := range a.Interfaces {
		idx := len(res.Interfaces)
		res.Interfaces = append(res.Interfaces, &types100.Interface{
			Name: pi.HostName, Mac: pi.MAC, Sandbox: a.Netns, SocketPath: pi.Socket, Mtu: s.cfg.MTU,
		})
		addrs, err := parsePrefixes(pi.IPAddresses)
		if err != nil {
			return nil, err
		}
		for _, p := range addrs {
			ipc := &types100.IPConfig{Interface: types100.Int(idx), Address: ipNet(p)}
			if gw := gatewayFor(p, routes); gw.IsValid() {
				ipc.Gateway = gw.AsSlice()
			}
			res.IPs = append(res.IPs, ipc)
		}
	}
	for _, rt := range routes {
		cr := &types.Route{Dst: ipNet(rt.Dst)}
		if rt.Gateway.IsValid() {
			cr.GW = rt.Gateway.AsSlice()
		}
		res.Routes = append(res.Routes, cr)
	}
	out, err := res.GetAsVersion(r.conf.CNIVersion)
	if err != nil {
		return nil, types.NewError(types.ErrIncompatibleCNIVersion, "cannot convert the result", err.Error())
	}
	var buf bytes.Buffer
	if err := out.PrintTo(&buf); err != nil {
		return nil, fmt.Errorf("encode result: %w", err)
	}
	return buf.Bytes(), nil
}

// gatewayFor returns the gateway of the address's family: that of the
// default route, else the first gateway inside the address's prefix.
func gatewayFor(p netip.Prefix, routes []Route) netip.Addr {
	var inside netip.Addr
	for _, r := range routes {
		if !r.Gateway.IsValid() || r.Gateway.Is4() != p.Addr().Is4() {
			continue
		}
		if r.Dst.Bits() == 0 {
			return r.Gateway
		}
		if !inside.IsValid() && p.Masked().Contains(r.Gateway) {
			inside = r.Gateway
		}
	}
	return inside
}

func ipNet(p netip.Prefix) net.IPNet {
	return net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}
