package vppdrivertest_test

import (
	"context"
	"net/netip"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.fd.io/govpp/adapter"
	interfaces "go.fd.io/govpp/binapi/interface"
	"go.fd.io/govpp/core"

	"github.com/vswitchkit/vswitchkit/vppdriver/vppdrivertest"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppsim"
)

// TestPing: two namespaces joined by a veth pair ping each other over IPv4
// and IPv6; an address nobody has gets no answer.
func TestPing(t *testing.T) {
	id := strconv.Itoa(os.Getpid() % 100000)
	a := vppdrivertest.NewNetns(t, "vsk-ping-a-"+id)
	b := vppdrivertest.NewNetns(t, "vsk-ping-b-"+id)
	// The host end of the pair is created in the test's namespace, then
	// moved: the helper deletes it by name there, so rename it first.
	vppdrivertest.Veth(t, "vskping"+id, b, "eth0")
	vppdrivertest.IP(t, "link", "set", "vskping"+id, "netns", a.Name())
	a.IP("link", "set", "vskping"+id, "name", "eth0")
	for _, n := range []struct {
		ns     *vppdrivertest.Netns
		v4, v6 string
	}{{a, "192.0.2.1/24", "2001:db8::1/64"}, {b, "192.0.2.2/24", "2001:db8::2/64"}} {
		n.ns.IP("addr", "add", n.v4, "dev", "eth0")
		n.ns.IP("addr", "add", n.v6, "dev", "eth0", "nodad")
		n.ns.IP("link", "set", "eth0", "up")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := a.Ping(ctx, netip.MustParseAddr("192.0.2.2"))
	require.NoError(t, err)
	_, err = b.Ping(ctx, netip.MustParseAddr("2001:db8::1"))
	require.NoError(t, err)
	short, cancel2 := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel2()
	_, err = a.Ping(short, netip.MustParseAddr("192.0.2.3"))
	require.Error(t, err)
}

// TestRequestRecorder: the requests sent through a wrapped adapter are
// recorded by name; Writes leaves out dumps and pings.
func TestRequestRecorder(t *testing.T) {
	vpp := vppsim.New(vppsim.Config{})
	var rec vppdrivertest.RequestRecorder
	conn, err := core.Connect(rec.Wrap(adapter.VppAPI(vpp.NewAdapter())))
	require.NoError(t, err)
	defer conn.Disconnect()
	ch, err := conn.NewAPIChannel()
	require.NoError(t, err)
	defer ch.Close()
	require.NoError(t, ch.SendRequest(&interfaces.CreateLoopback{}).ReceiveReply(&interfaces.CreateLoopbackReply{}))
	names := rec.Take()
	require.Contains(t, names, "create_loopback")
	require.Equal(t, []string{"create_loopback"}, vppdrivertest.Writes(names))
	require.Empty(t, rec.Take())
}
