package vppdriver_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.fd.io/govpp/adapter"
	"google.golang.org/protobuf/proto"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/vppdriver"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppmodel"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppsim"
)

// Example programs an uplink loopback and a route through it into the
// in-memory VPP stand-in and prints the per-key status and VPP's tables.
func Example() {
	vpp := vppsim.New(vppsim.Config{})
	d, err := vppdriver.New(func() adapter.VppAPI { return vpp.NewAdapter() }, vppdriver.Config{})
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- d.Run(ctx) }()

	values := controller.KeyValuePairs{}
	for _, m := range []proto.Message{
		&vppmodel.Interface{Name: "uplink", Type: vppmodel.Interface_LOOPBACK, Enabled: true,
			IpAddresses: []string{"192.168.16.5/24"}},
		&vppmodel.Route{DstNetwork: "10.2.0.0/16", Paths: []*vppmodel.Path{
			{OutgoingInterface: "uplink", NextHop: "192.168.16.6"},
		}},
	} {
		key, err := vppmodel.KeyOf(m)
		if err != nil {
			panic(err)
		}
		values[key] = m
	}
	// The resync is recorded at once and applied as soon as Run connects.
	if _, err := d.Commit(ctx, &controller.Commit{Kind: controller.CommitResync, Values: values}); err != nil {
		panic(err)
	}
	for !allConfigured(d) {
		time.Sleep(time.Millisecond)
	}
	st := d.Statuses()
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range st {
			if !yield(k) {
				return
			}
		}
	}) {
		fmt.Println(st[k])
	}
	snap := vpp.Snapshot()
	for _, i := range snap.Interfaces {
		fmt.Printf("interface %d %s tag=%q up=%v %v\n", i.SwIfIndex, i.Name, i.Tag, i.AdminUp, i.Addresses)
	}
	for _, r := range snap.Routes {
		fmt.Printf("route table %d %s via sw_if_index %d %s\n", r.Table, r.Prefix, r.Paths[0].SwIfIndex, r.Paths[0].NextHop)
	}
	cancel()
	fmt.Println("Run:", <-done)
	// Output:
	// vpp/interface/uplink: configured
	// vpp/route/0/10.2.0.0/16: configured
	// interface 0 local0 tag="" up=false []
	// interface 1 loop0 tag="vsk:uplink" up=true [192.168.16.5/24]
	// route table 0 10.2.0.0/16 via sw_if_index 1 192.168.16.6
	// Run: context canceled
}

func allConfigured(d *vppdriver.Driver) bool {
	st := d.Statuses()
	for _, s := range st {
		if s.State != vppdriver.StateConfigured {
			return false
		}
	}
	return len(st) > 0
}

// ExampleDriver_Commit commits a valid value, an invalid one (an address
// that does not parse, as external configuration may hold) and a key that
// belongs to someone else: the valid key is applied, the invalid one is
// rejected for itself alone (a permanent per-key error, not retried), the
// foreign key is ignored.
func ExampleDriver_Commit() {
	vpp := vppsim.New(vppsim.Config{})
	d, err := vppdriver.New(func() adapter.VppAPI { return vpp.NewAdapter() }, vppdriver.Config{})
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- d.Run(ctx) }()
	for !d.Connected() {
		time.Sleep(time.Millisecond)
	}

	values := controller.KeyValuePairs{
		vppmodel.InterfaceKey("uplink"): &vppmodel.Interface{Name: "uplink", Type: vppmodel.Interface_LOOPBACK, Enabled: true,
			IpAddresses: []string{"192.168.16.5/24"}},
		vppmodel.InterfaceKey("pods"): &vppmodel.Interface{Name: "pods", Type: vppmodel.Interface_LOOPBACK,
			IpAddresses: []string{"10.1.1.300/24"}},
		"myhandler/bookkeeping": &vppmodel.VrfTable{Id: 1}, // not under "vpp/": not the driver's
	}
	_, err = d.Commit(ctx, &controller.Commit{Kind: controller.CommitUpdate, Values: values})
	for _, ke := range controller.KeyErrors(err) {
		fmt.Println("rejected:", ke.Key)
	}
	fmt.Println("permanent:", controller.IsPermanent(err))
	for _, k := range []string{vppmodel.InterfaceKey("uplink"), vppmodel.InterfaceKey("pods")} {
		s, _ := d.Status(k)
		fmt.Println(k, s.State)
	}
	st := d.Stats()
	fmt.Printf("keys=%d configured=%d failed=%d invalid=%d rejected=%d\n",
		st.Keys, st.Configured, st.Failed, st.Invalid, st.InvalidRejected)
	cancel()
	fmt.Println("Run:", <-done)
	// Output:
	// rejected: vpp/interface/pods
	// permanent: true
	// vpp/interface/uplink configured
	// vpp/interface/pods failed
	// keys=2 configured=1 failed=1 invalid=1 rejected=1
	// Run: context canceled
}

// ExampleDriver_Degraded: a pod interface whose host interface does not
// exist fails again and again (af_packet_create_v3 answers -71); after
// Config.FailingAfter attempts the key is failing: counted by kind,
// listed, and reported by Degraded for a health endpoint.
func ExampleDriver_Degraded() {
	vpp := vppsim.New(vppsim.Config{}) // no host interface "veth-pod1"
	d, err := vppdriver.New(func() adapter.VppAPI { return vpp.NewAdapter() },
		vppdriver.Config{RetryInitial: time.Millisecond, RetryMax: time.Millisecond})
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- d.Run(ctx) }()

	pod := &vppmodel.Interface{Name: "pod1", Type: vppmodel.Interface_AF_PACKET, Enabled: true,
		AfPacket: &vppmodel.AfPacketLink{HostIfName: "veth-pod1"}}
	key, _ := vppmodel.KeyOf(pod)
	if _, err := d.Commit(ctx, &controller.Commit{Kind: controller.CommitUpdate, Values: controller.KeyValuePairs{key: pod}}); err != nil {
		panic(err) // the failure is not the commit's: the driver retries it
	}
	for d.Degraded() == nil {
		time.Sleep(time.Millisecond)
	}
	fmt.Println("failing:", d.Stats().FailingByKind)
	fmt.Println("degraded:", errors.Is(d.Degraded(), vppdriver.ErrDegraded))
	for _, s := range d.Failing() {
		fmt.Println(s.Key, s.State, s.Err)
	}
	cancel()
	<-done
	// Output:
	// failing: map[interface:1]
	// degraded: true
	// vpp/interface/pod1 failed af_packet_create_v3: VPPApiError: Invalid interface (-71)
}
