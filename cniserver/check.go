package cniserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"github.com/containernetworking/cni/pkg/types"
	types100 "github.com/containernetworking/cni/pkg/types/100"

	"github.com/vswitchkit/vswitchkit/controller/podiface"
)

// check serves CHECK: the attachment must be known and Ready, and the
// pod's interfaces must have what the agent configured (more is allowed:
// a chained plugin may add addresses or routes); the prevResult's
// addresses of the pod interface must be the agent's.
func (s *Server) check(ctx context.Context, r *request) error {
	a, ok, unlock, err := s.acquire(ctx, r.id)
	if err != nil {
		return err
	}
	defer unlock()
	if !ok || !a.Ready {
		return types.NewError(types.ErrUnknownContainer, "the vswitchkit agent has no attachment "+r.id.String(), "")
	}
	var problems []error
	if a.Netns != r.netns {
		problems = append(problems, fmt.Errorf("CNI_NETNS %s differs from the ADD's %s", r.netns, a.Netns))
	}
	problems = append(problems, checkPrevResult(a, r)...)

	if a.HostIfName != "" {
		st, err := s.linux.InspectLink(ctx, "", a.HostIfName)
		switch {
		case err != nil:
			problems = append(problems, fmt.Errorf("veth host end %s: %w", a.HostIfName, err))
		case !st.Up:
			problems = append(problems, fmt.Errorf("veth host end %s is down", a.HostIfName))
		}
	}
	links, _, err := s.plan(&a)
	if err != nil {
		return fmt.Errorf("stored result: %w", err)
	}
	for _, l := range links {
		st, err := s.linux.InspectLink(ctx, a.Netns, l.cfg.Name)
		if err != nil {
			if errors.Is(err, ErrNetnsNotFound) {
				return types.NewError(types.ErrUnknownContainer, "the container's network namespace does not exist", err.Error())
			}
			problems = append(problems, fmt.Errorf("interface %s: %w", l.cfg.Name, err))
			continue
		}
		problems = append(problems, compareLink(l.cfg, a.Interfaces[l.index].MAC, st)...)
	}
	if err := errors.Join(problems...); err != nil {
		return types.NewError(CodeCheckFailed, "the pod's network is not as the vswitchkit agent configured it", err.Error())
	}
	return nil
}

// compareLink lists what the link lacks of want (and its recorded MAC).
func compareLink(want LinkConfig, mac string, st LinkState) []error {
	var out []error
	name := want.Name
	if !st.Up {
		out = append(out, fmt.Errorf("interface %s is down", name))
	}
	if mac != "" && st.MAC.String() != mac {
		out = append(out, fmt.Errorf("interface %s has MAC %s, want %s", name, st.MAC, mac))
	}
	if want.MTU > 0 && st.MTU != want.MTU {
		out = append(out, fmt.Errorf("interface %s has MTU %d, want %d", name, st.MTU, want.MTU))
	}
	for _, p := range want.Addresses {
		if !slices.Contains(st.Addresses, p) {
			out = append(out, fmt.Errorf("interface %s lacks address %s", name, p))
		}
	}
	for _, r := range want.Routes {
		if !slices.Contains(st.Routes, r) {
			out = append(out, fmt.Errorf("interface %s lacks route %s", name, r))
		}
	}
	for _, n := range want.Neighbors {
		i := slices.IndexFunc(st.Neighbors, func(m Neighbor) bool { return m.IP == n.IP })
		if i < 0 || !bytes.Equal(st.Neighbors[i].MAC, n.MAC) {
			out = append(out, fmt.Errorf("interface %s lacks neighbor %s", name, n))
		}
	}
	return out
}

// checkPrevResult compares the runtime's record of the ADD with the
// agent's.
func checkPrevResult(a Attachment, r *request) []error {
	if r.conf.PrevResult == nil {
		return []error{errors.New("no prevResult in the network configuration")}
	}
	prev, err := types100.NewResultFromResult(r.conf.PrevResult)
	if err != nil {
		return []error{fmt.Errorf("prevResult: %w", err)}
	}
	var ours []netip.Prefix
	for _, pi := range a.Interfaces {
		if pi.HostName != a.ID.IfName {
			continue
		}
		ps, _ := parsePrefixes(pi.IPAddresses)
		ours = append(ours, ps...)
		if pi.Type == podiface.Memif {
			return nil // nothing in the sandbox to compare
		}
	}
	var out []error
	found := false
	for _, ip := range prev.IPs {
		if ip.Interface == nil || *ip.Interface < 0 || *ip.Interface >= len(prev.Interfaces) {
			continue
		}
		iface := prev.Interfaces[*ip.Interface]
		if iface.Name != a.ID.IfName || iface.Sandbox == "" {
			continue
		}
		found = true
		addr, ok := netip.AddrFromSlice(ip.Address.IP)
		ones, _ := ip.Address.Mask.Size()
		p := netip.PrefixFrom(addr.Unmap(), ones)
		if !ok || !slices.Contains(ours, p) {
			out = append(out, fmt.Errorf("prevResult address %s of %s is not the agent's %v", ip.Address.String(), iface.Name, ours))
		}
	}
	if !found && len(ours) > 0 {
		out = append(out, fmt.Errorf("prevResult has no address of %s; the agent has %v", a.ID.IfName, ours))
	}
	return out
}
