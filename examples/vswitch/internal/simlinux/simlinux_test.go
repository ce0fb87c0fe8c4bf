package simlinux_test

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vswitchkit/vswitchkit/cniserver"
	"github.com/vswitchkit/vswitchkit/examples/vswitch/internal/simlinux"
)

// TestNamespacesFollowPaths: a namespace exists while its path does; its
// links (and the host ends of their veth pairs) go with it.
func TestNamespacesFollowPaths(t *testing.T) {
	ctx := context.Background()
	l := simlinux.New()
	ns := filepath.Join(t.TempDir(), "pod1")
	v := cniserver.Veth{HostName: "vsk1", PeerName: "vsk1p", Netns: ns, IfName: "eth0"}

	_, err := l.EnsureVeth(ctx, v)
	require.ErrorIs(t, err, cniserver.ErrNetnsNotFound, "no file, no namespace")

	require.NoError(t, os.WriteFile(ns, nil, 0o600))
	_, err = l.EnsureVeth(ctx, v)
	require.NoError(t, err)
	assert.True(t, l.HostInterfaceExists("vsk1"))
	_, err = l.ConfigureLink(ctx, ns, cniserver.LinkConfig{Name: "eth0", Addresses: []netip.Prefix{netip.MustParsePrefix("10.1.1.2/24")}})
	require.NoError(t, err)
	st, err := l.InspectLink(ctx, ns, "eth0")
	require.NoError(t, err)
	assert.Equal(t, []netip.Prefix{netip.MustParsePrefix("10.1.1.2/24")}, st.Addresses)
	assert.Len(t, l.Links(ns), 1)

	require.NoError(t, os.Remove(ns))
	_, err = l.InspectLink(ctx, ns, "eth0")
	require.ErrorIs(t, err, cniserver.ErrNetnsNotFound)
	assert.False(t, l.HostInterfaceExists("vsk1"), "the host end goes with the namespace")
	require.NoError(t, l.DeleteLink(ctx, ns, "eth0"), "deleting in a gone namespace is no error")
}
