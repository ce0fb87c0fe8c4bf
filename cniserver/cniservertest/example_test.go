package cniservertest_test

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/vswitchkit/vswitchkit/cniserver"
	"github.com/vswitchkit/vswitchkit/cniserver/cniservertest"
)

// ExampleFakeLinux creates a veth pair into a pod's namespace and
// configures the pod's end, as the server does for an af_packet pod.
func ExampleFakeLinux() {
	ctx := context.Background()
	linux := cniservertest.NewFakeLinux()
	if err := linux.AddNetns("/run/netns/pod1"); err != nil {
		panic(err)
	}
	_, err := linux.EnsureVeth(ctx, cniserver.Veth{HostName: "vsk0", PeerName: "vsp0", Netns: "/run/netns/pod1", IfName: "eth0"})
	if err != nil {
		panic(err)
	}
	_, err = linux.ConfigureLink(ctx, "/run/netns/pod1", cniserver.LinkConfig{
		Name:      "eth0",
		Addresses: []netip.Prefix{netip.MustParsePrefix("10.1.5.2/24")},
		Routes:    []cniserver.Route{{Dst: netip.MustParsePrefix("0.0.0.0/0"), Gateway: netip.MustParseAddr("10.1.5.1")}},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(linux.Links(""))
	fmt.Println(linux.Links("/run/netns/pod1"))

	// Deleting the host end deletes the pair.
	if err := linux.DeleteLink(ctx, "", "vsk0"); err != nil {
		panic(err)
	}
	fmt.Println(linux.Links("/run/netns/pod1"))
	// Output:
	// [vsk0 up mac 02:fa:00:00:00:01 mtu 1500 addrs []]
	// [eth0 up mac 02:fa:00:00:00:02 mtu 1500 addrs [10.1.5.2/24], route 0.0.0.0/0 via 10.1.5.1]
	// []
}
