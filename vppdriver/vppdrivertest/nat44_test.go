package vppdrivertest_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.fd.io/govpp/adapter"
	"google.golang.org/protobuf/proto"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/vppdriver"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppdrivertest"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppmodel"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppsim"
)

// TestReadNAT44 applies NAT44 configuration with a driver whose adapters a
// RequestRecorder wraps, and reads it back with ReadNAT44.
func TestReadNAT44(t *testing.T) {
	vpp := vppsim.New(vppsim.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	empty, err := vppdrivertest.ReadNAT44(ctx, vpp.NewAdapter(), "vsk:")
	require.NoError(t, err)
	assert.Equal(t, vppdrivertest.NAT44{}, empty, "plugin disabled")

	var counter vppdrivertest.RequestRecorder
	d, err := vppdriver.New(func() adapter.VppAPI { return counter.Wrap(vpp.NewAdapter()) }, vppdriver.Config{})
	require.NoError(t, err)
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); assert.ErrorIs(t, d.Run(runCtx), context.Canceled) }()
	defer func() { stop(); wg.Wait() }()

	values := controller.KeyValuePairs{}
	add := func(m proto.Message) {
		k, err := vppmodel.KeyOf(m)
		require.NoError(t, err)
		values[k] = m
	}
	add(&vppmodel.Interface{Name: "up", Type: vppmodel.Interface_LOOPBACK, Enabled: true, IpAddresses: []string{"192.0.2.1/24"}})
	add(&vppmodel.Interface{Name: "pod", Type: vppmodel.Interface_LOOPBACK, Enabled: true})
	add(&vppmodel.Nat44Global{Forwarding: true})
	add(&vppmodel.Nat44Interface{Interface: "up", OutputFeature: true})
	add(&vppmodel.Nat44Interface{Interface: "pod", Inside: true, Outside: true})
	add(&vppmodel.Nat44AddressPool{Interface: "up"})
	add(&vppmodel.Nat44AddressPool{FirstIp: "172.30.1.254", Vrf: ^uint32(0), TwiceNat: true})
	add(&vppmodel.Nat44StaticMapping{Protocol: vppmodel.Nat44Protocol_TCP, LocalIp: "10.1.1.3", LocalPort: 8080,
		ExternalIp: "10.96.0.11", ExternalPort: 80, Out2InOnly: true, SelfTwiceNat: true})
	add(&vppmodel.Nat44LbStaticMapping{Protocol: vppmodel.Nat44Protocol_UDP, ExternalIp: "10.96.0.10", ExternalPort: 53,
		Out2InOnly: true, TwiceNat: true, Backends: []*vppmodel.Nat44Backend{
			{Ip: "10.1.1.4", Port: 5353, Probability: 2}, {Ip: "10.1.1.3", Port: 5353, Probability: 4}}})
	add(&vppmodel.Nat44IdentityMapping{Protocol: vppmodel.Nat44Protocol_UDP, Interface: "up", Port: 4789})
	_, err = d.Commit(ctx, &controller.Commit{Kind: controller.CommitResync, Values: values})
	require.NoError(t, err)
	require.Eventually(t, func() bool { s := d.Stats(); return s.Keys == s.Configured }, 10*time.Second, 5*time.Millisecond)

	got, err := vppdrivertest.ReadNAT44(ctx, vpp.NewAdapter(), "vsk:")
	require.NoError(t, err)
	assert.Equal(t, vppdrivertest.NAT44{
		Sessions: 64512, Forwarding: true,
		Interfaces: map[string]string{"up": "output", "pod": "in out"},
		Pools:      []string{"172.30.1.254 twice-nat", "192.0.2.1", "if:up"},
		Static:     []string{"tcp 10.96.0.11:80 -> 10.1.1.3:8080 out2in-only self-twice-nat"},
		LB:         []string{"udp 10.96.0.10:53 -> 10.1.1.3:5353/4 10.1.1.4:5353/2 out2in-only twice-nat"},
		Identity:   []string{"udp 192.0.2.1:4789", "udp if:up:4789"},
	}, got)

	assert.Equal(t, uint64(1), counter.Count("nat44_add_del_lb_static_mapping"))
	assert.Equal(t, uint64(2), counter.Count("create_loopback"))
	assert.Positive(t, counter.Count("nat44_show_running_config"), "the driver's readback")
	writes := counter.WriteCount()
	for name, n := range counter.Counts() {
		if vppdrivertest.ReadOnlyMessage(name) {
			continue
		}
		writes -= n
	}
	assert.Zero(t, writes, "Writes counts exactly the requests that are not read-only")
	assert.True(t, vppdrivertest.ReadOnlyMessage("nat44_ed_output_interface_get"))
	assert.False(t, vppdrivertest.ReadOnlyMessage("nat44_add_del_interface_addr"))
}
