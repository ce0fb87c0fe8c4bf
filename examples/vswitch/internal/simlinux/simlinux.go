package simlinux

import (
	"context"
	"errors"
	"net"
	"os"
	"slices"
	"sync"

	"github.com/vswitchkit/vswitchkit/cniserver"
	"github.com/vswitchkit/vswitchkit/cniserver/cniservertest"
)

// Linux is a [cniserver.Linux] on simulated links whose namespaces are
// paths on disk.
type Linux struct {
	fake *cniservertest.FakeLinux

	mu  sync.Mutex          // serializes namespace bookkeeping with its use
	nss map[string]struct{} // guarded by mu; the namespaces made in fake
}

var _ cniserver.Linux = (*Linux)(nil)

// New returns a Linux with no links.
func New() *Linux { return &Linux{fake: cniservertest.NewFakeLinux(), nss: map[string]struct{}{}} }

// HostInterfaceExists tells whether a link of that name is in the host
// namespace (VPP's af_packet attaches to the host end of a pod's veth
// pair): vppsim.Config.HostInterfaceExists. The host ends of pods whose
// namespace path is gone are gone too.
func (l *Linux) HostInterfaceExists(name string) bool {
	l.mu.Lock()
	for path := range l.nss {
		l.sync(path)
	}
	l.mu.Unlock()
	return slices.ContainsFunc(l.fake.Links(""), func(s cniserver.LinkState) bool { return s.Name == name })
}

// Links returns the links of a namespace (see cniservertest.FakeLinux).
func (l *Linux) Links(netns string) []cniserver.LinkState { return l.fake.Links(netns) }

// sync makes the fake's namespace at path exist exactly while the path
// does. The caller holds mu.
func (l *Linux) sync(path string) {
	if path == "" {
		return
	}
	_, err := os.Stat(path)
	_, known := l.nss[path]
	switch exists := err == nil; {
	case exists && !known:
		_ = l.fake.AddNetns(path)
		l.nss[path] = struct{}{}
	case !exists && known:
		l.fake.DeleteNetns(path)
		delete(l.nss, path)
	}
}

// EnsureVeth implements cniserver.Linux.
func (l *Linux) EnsureVeth(ctx context.Context, v cniserver.Veth) (net.HardwareAddr, error) {
	l.mu.Lock()
	l.sync(v.Netns)
	l.mu.Unlock()
	return l.fake.EnsureVeth(ctx, v)
}

// ConfigureLink implements cniserver.Linux.
func (l *Linux) ConfigureLink(ctx context.Context, netns string, cfg cniserver.LinkConfig) (net.HardwareAddr, error) {
	l.mu.Lock()
	l.sync(netns)
	l.mu.Unlock()
	return l.fake.ConfigureLink(ctx, netns, cfg)
}

// DeleteLink implements cniserver.Linux.
func (l *Linux) DeleteLink(ctx context.Context, netns, name string) error {
	l.mu.Lock()
	l.sync(netns)
	l.mu.Unlock()
	err := l.fake.DeleteLink(ctx, netns, name)
	if errors.Is(err, cniserver.ErrNetnsNotFound) {
		return nil // a missing namespace is not an error here
	}
	return err
}

// InspectLink implements cniserver.Linux.
func (l *Linux) InspectLink(ctx context.Context, netns, name string) (cniserver.LinkState, error) {
	l.mu.Lock()
	l.sync(netns)
	l.mu.Unlock()
	return l.fake.InspectLink(ctx, netns, name)
}
