package cniserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/controller/podiface"
)

// add serves ADD. Every step is idempotent, and the attachment is stored
// (not Ready) before anything is created, so a repeated ADD, a DEL or GC
// after an agent restart finds what an interrupted ADD left.
func (s *Server) add(ctx context.Context, r *request) ([]byte, error) {
	prev, known, unlock, err := s.acquire(ctx, r.id)
	if err != nil {
		return nil, err
	}
	defer func() {
		if unlock != nil {
			unlock()
		}
	}()

	if known && prev.Ready {
		// The runtime repeats an ADD it did not get the answer of: the
		// attachment is connected, return its result.
		return s.cniResult(prev, r)
	}

	// The namespace must exist, and the interface name must be free (or
	// ours, from an interrupted ADD of this attachment).
	_, err = s.linux.InspectLink(ctx, r.netns, r.id.IfName)
	switch {
	case err == nil && !known:
		return nil, fmt.Errorf("interface %s in %s: %w", r.id.IfName, r.netns, ErrLinkExists)
	case errors.Is(err, ErrNetnsNotFound):
		return nil, fmt.Errorf("netns %s: %w", r.netns, err)
	case err != nil && !errors.Is(err, ErrLinkNotFound):
		return nil, fmt.Errorf("inspect %s in %s: %w", r.id.IfName, r.netns, err)
	}

	typ, err := s.interfaceType(ctx, r.pod)
	if err != nil {
		return nil, err
	}
	a := Attachment{ID: r.id, Network: r.conf.Name, Pod: r.pod, Netns: r.netns, Type: typ}
	if known {
		// Keep what the interrupted ADD chose, so it finds its veth.
		a.Type, a.HostIfName = prev.Type, prev.HostIfName
	} else if typ == podiface.AfPacket || typ == podiface.Default {
		a.HostIfName = HostIfName(r.id.ContainerID, r.id.IfName)
	}
	if err := s.put(ctx, a); err != nil {
		return nil, err
	}

	// From here on a failure undoes the attachment.
	if a.HostIfName != "" {
		v := Veth{HostName: a.HostIfName, PeerName: peerIfName(r.id.ContainerID, r.id.IfName), MTU: s.cfg.MTU}
		if a.Type == podiface.AfPacket {
			v.Netns, v.IfName = r.netns, r.id.IfName
		}
		mac, err := s.linux.EnsureVeth(ctx, v)
		if err != nil {
			return nil, s.undo(a, false, fmt.Errorf("create veth %s: %w", v.HostName, err))
		}
		a.HostMAC = mac.String()
	}

	ev := controller.NewAddPodEvent(r.pod, r.id.ContainerID, r.netns)
	ev.IfName = r.id.IfName
	ev.InterfaceType = a.Type
	ev.HostIfName = a.HostIfName
	if len(r.ipamResult) > 0 {
		ev.IPAMType, ev.IPAMData = r.conf.IPAM.Type, string(r.ipamResult)
	}
	later, err := s.pushAndWait(ctx, ev)
	if later != nil {
		// The request ended while the event waits in the loop. Whatever
		// its outcome, undo the attachment once it is known, keeping the
		// attachment locked until then; the runtime's DEL waits for it.
		release := unlock
		unlock = nil
		s.wg.Go(func() {
			defer release()
			evErr := <-later
			_ = s.undo(a, evErr == nil, err)
		})
		return nil, err
	}
	if err != nil {
		// The loop reverted the handlers (RevertOnFailure): nothing was
		// committed, only the veth is ours to remove.
		return nil, s.undo(a, false, fmt.Errorf("AddPod %s: %w", r.pod, err))
	}

	a.Interfaces, a.Routes = ev.Interfaces, ev.Routes
	if err := s.configurePod(ctx, &a); err != nil {
		return nil, s.undo(a, true, err)
	}
	a.Ready = true
	if err := s.put(ctx, a); err != nil {
		return nil, s.undo(a, true, err)
	}
	return s.cniResult(a, r)
}

// interfaceType decides the interface type of a new attachment.
func (s *Server) interfaceType(ctx context.Context, pod kubemodel.PodID) (podiface.Type, error) {
	typ := podiface.Default
	if s.cfg.InterfaceTypeFor != nil {
		t, err := s.cfg.InterfaceTypeFor(ctx, pod)
		if err != nil {
			if errors.Is(err, ErrInvalidConfig) {
				return "", types.NewError(types.ErrInvalidNetworkConfig, "invalid interface type for pod "+pod.String(), err.Error())
			}
			return "", types.NewError(types.ErrTryAgainLater, "cannot tell the interface type of pod "+pod.String(), err.Error())
		}
		if _, err := podiface.ParseType(string(t)); err != nil {
			return "", types.NewError(types.ErrInvalidNetworkConfig, "invalid interface type for pod "+pod.String(), err.Error())
		}
		typ = t
	}
	if typ == podiface.Default {
		typ = s.cfg.InterfaceType
	}
	return typ, nil
}

// podLink is one kernel interface of the pod to configure.
type podLink struct {
	index int // in Attachment.Interfaces
	cfg   LinkConfig
}

// configurePod does the pod's side after the handlers connected it: the
// af_packet veth's pod end into the namespace (when the handlers chose
// af_packet for a podiface.Default request), the removal of a veth
// prepared for nothing, and the configuration of every kernel interface.
// It fills in a.Type and the MAC of each kernel interface.
func (s *Server) configurePod(ctx context.Context, a *Attachment) error {
	links, typ, err := s.plan(a)
	if err != nil {
		return err
	}
	requested := a.Type
	a.Type = typ
	switch {
	case typ == podiface.AfPacket && requested == podiface.Default:
		v := Veth{HostName: a.HostIfName, PeerName: peerIfName(a.ID.ContainerID, a.ID.IfName),
			Netns: a.Netns, IfName: a.ID.IfName, MTU: s.cfg.MTU}
		if _, err := s.linux.EnsureVeth(ctx, v); err != nil {
			return fmt.Errorf("move veth end into %s: %w", a.Netns, err)
		}
	case typ != podiface.AfPacket && a.HostIfName != "":
		// Prepared for af_packet, but the handlers chose otherwise.
		if err := s.linux.DeleteLink(ctx, "", a.HostIfName); err != nil {
			return fmt.Errorf("delete unused veth %s: %w", a.HostIfName, err)
		}
		a.HostIfName, a.HostMAC = "", ""
	}
	for _, l := range links {
		mac, err := s.linux.ConfigureLink(ctx, a.Netns, l.cfg)
		if err != nil {
			return fmt.Errorf("configure %s in %s: %w", l.cfg.Name, a.Netns, err)
		}
		a.Interfaces[l.index].MAC = mac.String()
	}
	return nil
}

// plan validates the handlers' results and turns them into link
// configurations; it returns the attachment's interface type (that of the
// interface named CNI_IFNAME).
func (s *Server) plan(a *Attachment) ([]podLink, podiface.Type, error) {
	if len(a.Interfaces) == 0 {
		return nil, "", errors.New("no handler connected the pod: AddPod returned no interfaces")
	}
	typeOf := func(pi podiface.Interface) podiface.Type {
		if pi.Type != podiface.Default {
			return pi.Type
		}
		return a.Type
	}
	primary := -1
	for i, pi := range a.Interfaces {
		if pi.HostName == a.ID.IfName {
			primary = i
			break
		}
	}
	if primary < 0 {
		return nil, "", fmt.Errorf("the handlers returned no interface named %s (CNI_IFNAME)", a.ID.IfName)
	}
	typ := typeOf(a.Interfaces[primary])
	if typ == podiface.Default {
		return nil, "", fmt.Errorf("the handlers did not tell the type of interface %s", a.ID.IfName)
	}
	if typ == podiface.AfPacket && a.HostIfName == "" {
		return nil, "", fmt.Errorf("the handlers connected %s with af_packet, but the server prepared no veth (requested %q)", a.ID.IfName, a.Type)
	}
	routes, err := parseRoutes(a.Routes)
	if err != nil {
		return nil, "", err
	}
	var links []podLink
	for i, pi := range a.Interfaces {
		t := typeOf(pi)
		if _, err := podiface.ParseType(string(t)); err != nil {
			return nil, "", fmt.Errorf("interface %s: %w", pi.HostName, err)
		}
		if t == podiface.Default {
			return nil, "", fmt.Errorf("the handlers did not tell the type of interface %s", pi.HostName)
		}
		if t == podiface.AfPacket && pi.HostName != a.ID.IfName {
			return nil, "", fmt.Errorf("interface %s: af_packet is only possible for %s, the veth the server created", pi.HostName, a.ID.IfName)
		}
		addrs, err := parsePrefixes(pi.IPAddresses)
		if err != nil {
			return nil, "", fmt.Errorf("interface %s: %w", pi.HostName, err)
		}
		cfg := LinkConfig{Name: pi.HostName, MTU: s.cfg.MTU, Addresses: addrs}
		if pi.MAC != "" {
			if cfg.MAC, err = net.ParseMAC(pi.MAC); err != nil {
				return nil, "", fmt.Errorf("interface %s: MAC: %w", pi.HostName, err)
			}
		}
		if t == podiface.Memif {
			if pi.Socket == "" {
				return nil, "", fmt.Errorf("memif interface %s has no socket", pi.HostName)
			}
			continue // no kernel interface
		}
		if i == primary {
			cfg.Routes = routes
			if pi.GatewayMAC != "" {
				gwMAC, err := net.ParseMAC(pi.GatewayMAC)
				if err != nil {
					return nil, "", fmt.Errorf("interface %s: gateway MAC: %w", pi.HostName, err)
				}
				seen := map[netip.Addr]bool{}
				for _, r := range routes {
					if r.Gateway.IsValid() && !seen[r.Gateway] {
						seen[r.Gateway] = true
						cfg.Neighbors = append(cfg.Neighbors, Neighbor{IP: r.Gateway, MAC: gwMAC})
					}
				}
			}
		}
		links = append(links, podLink{index: i, cfg: cfg})
	}
	return links, typ, nil
}

func parsePrefixes(cidrs []string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(cidrs))
	for _, c := range cidrs {
		p, err := netip.ParsePrefix(c)
		if err != nil {
			return nil, fmt.Errorf("address %q is not in CIDR notation: %w", c, err)
		}
		out = append(out, netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-unmapBits(p.Addr())))
	}
	return out, nil
}

// unmapBits is 96 for an IPv4-mapped IPv6 address (its prefix length is
// counted in IPv6 bits), else 0.
func unmapBits(a netip.Addr) int {
	if a.Is4In6() {
		return 96
	}
	return 0
}

func parseRoutes(rs []podiface.Route) ([]Route, error) {
	out := make([]Route, 0, len(rs))
	for _, r := range rs {
		dst, err := netip.ParsePrefix(r.Network)
		if err != nil {
			return nil, fmt.Errorf("route %q: %w", r.Network, err)
		}
		rt := Route{Dst: dst.Masked()}
		if r.Gateway != "" {
			if rt.Gateway, err = netip.ParseAddr(r.Gateway); err != nil {
				return nil, fmt.Errorf("route %s: gateway: %w", r.Network, err)
			}
			if rt.Gateway.Is4() != rt.Dst.Addr().Is4() {
				return nil, fmt.Errorf("route %s: gateway %s of another address family", r.Network, r.Gateway)
			}
		}
		out = append(out, rt)
	}
	return out, nil
}

// undo removes what an ADD created: the pod's connection (DeletePod, when
// the handlers may have connected it), the veth and the record. It runs
// with its own context (the request's may have ended) and returns cause,
// with what could not be undone joined; what is left stays recorded, for
// the runtime's DEL or GC. The caller holds a.ID's lock.
func (s *Server) undo(a Attachment, connected bool, cause error) error {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.CleanupTimeout)
	defer cancel()
	var err error
	if connected {
		err = s.remove(ctx, a)
	} else {
		err = s.removeLinux(ctx, a)
		if err == nil {
			err = s.forget(ctx, a.ID)
		}
	}
	if err != nil {
		s.log.Warn("failed ADD not fully undone; the runtime's DEL or GC retries",
			slog.String("attachment", a.ID.String()), slog.Any("cause", cause), slog.Any("error", err))
		return errors.Join(cause, fmt.Errorf("undo: %w", err))
	}
	return cause
}
