package cniservertest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"sync"

	"github.com/vswitchkit/vswitchkit/cniserver"
)

// LinuxFuncs injects faults into a [FakeLinux]: a non-nil field is called
// before the method of the same name does anything, and a non-nil error
// it returns is the method's result (the state is not changed). The
// functions may be called concurrently; set them with SetFuncs.
type LinuxFuncs struct {
	EnsureVeth    func(ctx context.Context, v cniserver.Veth) error
	ConfigureLink func(ctx context.Context, netns string, cfg cniserver.LinkConfig) error
	DeleteLink    func(ctx context.Context, netns, name string) error
	InspectLink   func(ctx context.Context, netns, name string) error
}

// FakeLinux is an in-memory [cniserver.Linux]: namespaces are paths
// registered with AddNetns, links have a name, a MAC, an MTU, an admin
// state, addresses, routes and permanent neighbors, and veth pairs are
// linked so that deleting one end (or the namespace of one end) deletes
// both. It follows the contract as the netlink implementation does (the
// two run the same contract test). It is safe for concurrent use.
type FakeLinux struct {
	mu      sync.Mutex
	nss     map[string]*fakeNS // guarded by mu; "" is the host namespace
	nextMAC uint32             // guarded by mu
	funcs   LinuxFuncs         // guarded by mu
	calls   map[string]int     // guarded by mu
}

type fakeNS struct {
	path  string
	links map[string]*fakeLink
}

type fakeLink struct {
	ns    *fakeNS
	name  string
	kind  string // "veth" or what AddLink was given
	mac   net.HardwareAddr
	mtu   int
	up    bool
	addrs []netip.Prefix
	// routes and neighbors, keyed like the kernel's replace semantics.
	routes map[netip.Prefix]cniserver.Route
	neighs map[netip.Addr]net.HardwareAddr
	peer   *fakeLink
}

// NewFakeLinux returns a FakeLinux with an empty host namespace.
func NewFakeLinux() *FakeLinux {
	return &FakeLinux{nss: map[string]*fakeNS{"": newFakeNS("")}, calls: map[string]int{}}
}

func newFakeNS(path string) *fakeNS { return &fakeNS{path: path, links: map[string]*fakeLink{}} }

var _ cniserver.Linux = (*FakeLinux)(nil)

// SetFuncs replaces the fault-injection functions.
func (f *FakeLinux) SetFuncs(funcs LinuxFuncs) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.funcs = funcs
}

// Calls returns how often each method was called (by method name).
func (f *FakeLinux) Calls() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.calls)
}

// AddNetns registers an empty network namespace at path (like `ip netns
// add`). Adding an existing one is an error.
func (f *FakeLinux) AddNetns(path string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.nss[path]; ok || path == "" {
		return fmt.Errorf("netns %q exists", path)
	}
	f.nss[path] = newFakeNS(path)
	return nil
}

// DeleteNetns removes the namespace at path and its links; the peers of
// its veth ends, wherever they are, go too (as in the kernel).
func (f *FakeLinux) DeleteNetns(path string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, ok := f.nss[path]
	if !ok || path == "" {
		return
	}
	for _, l := range n.links {
		f.deleteLocked(l)
	}
	delete(f.nss, path)
}

// AddLink creates a link of the given kind (e.g. "tap", as VPP creates a
// tap in a pod's namespace) named name in netns, down and without
// addresses.
func (f *FakeLinux) AddLink(netns, name, kind string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, ok := f.nss[netns]
	if !ok {
		return fmt.Errorf("%w: %s", cniserver.ErrNetnsNotFound, netns)
	}
	if _, ok := n.links[name]; ok {
		return fmt.Errorf("%w: %s", cniserver.ErrLinkExists, name)
	}
	n.links[name] = f.newLinkLocked(n, name, kind)
	return nil
}

// Links returns the state of every link in netns, sorted by name; nil if
// the namespace does not exist.
func (f *FakeLinux) Links(netns string) []cniserver.LinkState {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, ok := f.nss[netns]
	if !ok {
		return nil
	}
	out := []cniserver.LinkState{}
	for _, name := range slices.Sorted(maps.Keys(n.links)) {
		out = append(out, n.links[name].state())
	}
	return out
}

func (f *FakeLinux) newLinkLocked(n *fakeNS, name, kind string) *fakeLink {
	f.nextMAC++
	m := f.nextMAC
	return &fakeLink{ns: n, name: name, kind: kind, mtu: 1500,
		mac:    net.HardwareAddr{0x02, 0xfa, byte(m >> 24), byte(m >> 16), byte(m >> 8), byte(m)},
		routes: map[netip.Prefix]cniserver.Route{}, neighs: map[netip.Addr]net.HardwareAddr{}}
}

func (f *FakeLinux) deleteLocked(l *fakeLink) {
	delete(l.ns.links, l.name)
	if l.peer != nil {
		delete(l.peer.ns.links, l.peer.name)
		l.peer.peer = nil
		l.peer = nil
	}
}

// enter counts the call and runs the fault injection.
func (f *FakeLinux) enter(ctx context.Context, method string, inject func() error) error {
	f.mu.Lock()
	f.calls[method]++
	f.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	if inject != nil {
		return inject()
	}
	return nil
}

func (f *FakeLinux) funcsCopy() LinuxFuncs {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.funcs
}

func (f *FakeLinux) ns(path string) (*fakeNS, error) {
	n, ok := f.nss[path]
	if !ok {
		return nil, fmt.Errorf("%w: %s", cniserver.ErrNetnsNotFound, path)
	}
	return n, nil
}

// EnsureVeth implements cniserver.Linux.
func (f *FakeLinux) EnsureVeth(ctx context.Context, v cniserver.Veth) (net.HardwareAddr, error) {
	fn := f.funcsCopy().EnsureVeth
	if err := f.enter(ctx, "EnsureVeth", func() error {
		if fn != nil {
			return fn(ctx, v)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	host := f.nss[""]
	var pod *fakeNS
	if v.Netns != "" {
		var err error
		if pod, err = f.ns(v.Netns); err != nil {
			return nil, err
		}
	}
	for attempt := 0; ; attempt++ {
		hl := host.links[v.HostName]
		if hl == nil {
			if pod != nil && pod.links[v.IfName] != nil {
				return nil, fmt.Errorf("%w: %s in %s", cniserver.ErrLinkExists, v.IfName, v.Netns)
			}
			if host.links[v.PeerName] != nil {
				return nil, fmt.Errorf("%w: %s in the host namespace", cniserver.ErrLinkExists, v.PeerName)
			}
			hl = f.newLinkLocked(host, v.HostName, "veth")
			pl := f.newLinkLocked(host, v.PeerName, "veth")
			hl.peer, pl.peer = pl, hl
			if v.MTU > 0 {
				hl.mtu, pl.mtu = v.MTU, v.MTU
			}
			host.links[hl.name], host.links[pl.name] = hl, pl
		}
		pl := hl.peer
		switch {
		case pl != nil && pl.ns == host && pod == nil:
		case pl != nil && pl.ns == host:
			if pod.links[v.IfName] != nil {
				return nil, fmt.Errorf("%w: %s in %s", cniserver.ErrLinkExists, v.IfName, v.Netns)
			}
			delete(host.links, pl.name)
			pl.ns, pl.name = pod, v.IfName
			pl.up, pl.addrs = false, nil
			clear(pl.routes)
			clear(pl.neighs)
			pod.links[pl.name] = pl
		case pl != nil && pl.ns == pod:
			if pl.name != v.IfName {
				if pod.links[v.IfName] != nil {
					return nil, fmt.Errorf("%w: %s in %s", cniserver.ErrLinkExists, v.IfName, v.Netns)
				}
				delete(pod.links, pl.name)
				pl.name = v.IfName
				pod.links[pl.name] = pl
			}
		default:
			if pod != nil && pod.links[v.IfName] != nil && pod.links[v.IfName].peer != hl {
				return nil, fmt.Errorf("%w: %s in %s is not the peer of %s", cniserver.ErrLinkExists, v.IfName, v.Netns, v.HostName)
			}
			if attempt > 0 {
				return nil, fmt.Errorf("veth %s: peer not found after re-creating the pair", v.HostName)
			}
			f.deleteLocked(hl)
			continue
		}
		if v.MTU > 0 {
			hl.mtu = v.MTU
		}
		hl.up = true
		return slices.Clone(hl.mac), nil
	}
}

// ConfigureLink implements cniserver.Linux.
func (f *FakeLinux) ConfigureLink(ctx context.Context, netns string, cfg cniserver.LinkConfig) (net.HardwareAddr, error) {
	fn := f.funcsCopy().ConfigureLink
	if err := f.enter(ctx, "ConfigureLink", func() error {
		if fn != nil {
			return fn(ctx, netns, cfg)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	n, err := f.ns(netns)
	if err != nil {
		return nil, err
	}
	l := n.links[cfg.Name]
	if l == nil {
		return nil, fmt.Errorf("%w: %s", cniserver.ErrLinkNotFound, cfg.Name)
	}
	for _, r := range cfg.Routes {
		if r.Gateway.IsValid() && r.Gateway.Is4() != r.Dst.Addr().Is4() {
			return nil, fmt.Errorf("%s: route %s: gateway of another family", cfg.Name, r)
		}
	}
	if len(cfg.MAC) > 0 {
		l.mac = slices.Clone(cfg.MAC)
	}
	if cfg.MTU > 0 {
		l.mtu = cfg.MTU
	}
	l.up = true
	l.addrs = slices.Clone(cfg.Addresses)
	for _, r := range cfg.Routes {
		if r.Gateway.IsValid() && !covered(cfg.Addresses, r.Gateway) {
			p := netip.PrefixFrom(r.Gateway, r.Gateway.BitLen())
			l.routes[p] = cniserver.Route{Dst: p}
		}
	}
	for _, r := range cfg.Routes {
		l.routes[r.Dst] = r
	}
	for _, nb := range cfg.Neighbors {
		l.neighs[nb.IP] = slices.Clone(nb.MAC)
	}
	return slices.Clone(l.mac), nil
}

func covered(ps []netip.Prefix, a netip.Addr) bool {
	for _, p := range ps {
		if p.Masked().Contains(a) {
			return true
		}
	}
	return false
}

// DeleteLink implements cniserver.Linux.
func (f *FakeLinux) DeleteLink(ctx context.Context, netns, name string) error {
	fn := f.funcsCopy().DeleteLink
	if err := f.enter(ctx, "DeleteLink", func() error {
		if fn != nil {
			return fn(ctx, netns, name)
		}
		return nil
	}); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	n, ok := f.nss[netns]
	if !ok {
		return nil
	}
	if l := n.links[name]; l != nil {
		f.deleteLocked(l)
	}
	return nil
}

// InspectLink implements cniserver.Linux.
func (f *FakeLinux) InspectLink(ctx context.Context, netns, name string) (cniserver.LinkState, error) {
	fn := f.funcsCopy().InspectLink
	if err := f.enter(ctx, "InspectLink", func() error {
		if fn != nil {
			return fn(ctx, netns, name)
		}
		return nil
	}); err != nil {
		return cniserver.LinkState{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	n, err := f.ns(netns)
	if err != nil {
		return cniserver.LinkState{}, err
	}
	l := n.links[name]
	if l == nil {
		return cniserver.LinkState{}, fmt.Errorf("%w: %s", cniserver.ErrLinkNotFound, name)
	}
	return l.state(), nil
}

func (l *fakeLink) state() cniserver.LinkState {
	st := cniserver.LinkState{Name: l.name, MAC: slices.Clone(l.mac), MTU: l.mtu, Up: l.up,
		Addresses: slices.Clone(l.addrs)}
	for _, r := range l.routes {
		st.Routes = append(st.Routes, r)
	}
	for ip, mac := range l.neighs {
		st.Neighbors = append(st.Neighbors, cniserver.Neighbor{IP: ip, MAC: slices.Clone(mac)})
	}
	st.Sort()
	return st
}

// ---- store ----

// StoreFuncs injects faults into a [MemStore], like [LinuxFuncs]. The
// functions are called with the store's lock held, one at a time; set
// them with SetFuncs.
type StoreFuncs struct {
	PutAttachment    func(a cniserver.Attachment) error
	DeleteAttachment func(id cniserver.AttachmentID) error
	ListAttachments  func() error
}

// MemStore is an in-memory [cniserver.Store]. Share one between two
// servers to simulate an agent restart over the same state directory. It
// is safe for concurrent use.
type MemStore struct {
	mu    sync.Mutex
	m     map[cniserver.AttachmentID]cniserver.Attachment // guarded by mu
	funcs StoreFuncs                                      // guarded by mu
}

// NewMemStore returns an empty MemStore.
func NewMemStore() *MemStore {
	return &MemStore{m: map[cniserver.AttachmentID]cniserver.Attachment{}}
}

var _ cniserver.Store = (*MemStore)(nil)

// SetFuncs replaces the fault-injection functions.
func (s *MemStore) SetFuncs(funcs StoreFuncs) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.funcs = funcs
}

// PutAttachment implements cniserver.Store.
func (s *MemStore) PutAttachment(ctx context.Context, a cniserver.Attachment) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.funcs.PutAttachment != nil {
		if err := s.funcs.PutAttachment(a); err != nil {
			return err
		}
	}
	s.m[a.ID] = a.Clone()
	return nil
}

// DeleteAttachment implements cniserver.Store.
func (s *MemStore) DeleteAttachment(ctx context.Context, id cniserver.AttachmentID) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.funcs.DeleteAttachment != nil {
		if err := s.funcs.DeleteAttachment(id); err != nil {
			return err
		}
	}
	delete(s.m, id)
	return nil
}

// ListAttachments implements cniserver.Store.
func (s *MemStore) ListAttachments(ctx context.Context) ([]cniserver.Attachment, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.funcs.ListAttachments != nil {
		if err := s.funcs.ListAttachments(); err != nil {
			return nil, err
		}
	}
	out := make([]cniserver.Attachment, 0, len(s.m))
	for _, a := range s.m {
		out = append(out, a.Clone())
	}
	return out, nil
}

// Records returns a copy of the stored attachments.
func (s *MemStore) Records() map[cniserver.AttachmentID]cniserver.Attachment {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[cniserver.AttachmentID]cniserver.Attachment, len(s.m))
	for id, a := range s.m {
		out[id] = a.Clone()
	}
	return out
}

// ErrInjected is a convenient error for fault injection.
var ErrInjected = errors.New("cniservertest: injected failure")
