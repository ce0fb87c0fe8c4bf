package vppdriver_test

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.fd.io/govpp/adapter"
	"go.fd.io/govpp/adapter/socketclient"
	"google.golang.org/protobuf/proto"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/vppdriver"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppdrivertest"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppmodel"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppsim"
)

// BenchmarkApplyRoutes10k applies 10000 routes through the stand-in (one
// update commit, pipelined) and deletes them again (another commit) per
// iteration; msgs/s counts the requests VPP handled.
func BenchmarkApplyRoutes10k(b *testing.B) {
	vpp := vppsim.New(vppsim.Config{})
	cfg := testCfg()
	cfg.HealthInterval = time.Hour
	d := startDriver(b, vpp, cfg)
	commit(b, d, controller.CommitUpdate, kv(b, loop("up", true, 0, "10.0.0.1/24")))
	waitConfigured(b, d, 1)

	const n = 10000
	add := controller.KeyValuePairs{}
	del := controller.KeyValuePairs{}
	for i := range n {
		dst := netip.PrefixFrom(netip.AddrFrom4([4]byte{100, byte(i >> 8), byte(i), 0}), 24)
		r := &vppmodel.Route{DstNetwork: dst.String(), Paths: []*vppmodel.Path{{OutgoingInterface: "up", NextHop: "10.0.0.2"}}}
		k := vppmodel.RouteKey(0, dst)
		add[k] = r
		del[k] = nil
	}
	before := vpp.Stats().Requests
	b.ResetTimer()
	start := time.Now()
	for b.Loop() {
		commit(b, d, controller.CommitUpdate, add)
		commit(b, d, controller.CommitUpdate, del)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	msgs := vpp.Stats().Requests - before
	require.Equal(b, uint64(2*n*b.N), msgs)
	b.ReportMetric(float64(msgs)/elapsed.Seconds(), "msgs/s")
	s, _ := d.Status(vppmodel.InterfaceKey("up"))
	require.Equal(b, vppdriver.StateConfigured, s.State)
}

// installed builds a node state of n keys: an uplink and a pod-side
// loopback with NAT44-ED on them, and (n-5)/2 routes and as many NAT44
// load-balanced mappings (2 backends each) beside them.
func installed(n int) controller.KeyValuePairs {
	values := controller.KeyValuePairs{}
	add := func(m proto.Message) {
		k, err := vppmodel.KeyOf(m)
		if err != nil {
			panic(err)
		}
		values[k] = m
	}
	add(&vppmodel.Interface{Name: "up", Type: vppmodel.Interface_LOOPBACK, Enabled: true, IpAddresses: []string{"10.0.0.1/16"}})
	add(&vppmodel.Interface{Name: "pods", Type: vppmodel.Interface_LOOPBACK, Enabled: true, IpAddresses: []string{"10.1.0.1/16"}})
	add(&vppmodel.Nat44Global{})
	add(&vppmodel.Nat44Interface{Interface: "up", Outside: true})
	add(&vppmodel.Nat44Interface{Interface: "pods", Inside: true})
	for i := range (n - 5) / 2 {
		add(benchRoute(i, "10.0.0.2"))
		add(benchLB(i, "10.1.0.2"))
	}
	return values
}

func benchRoute(i int, nh string) *vppmodel.Route {
	dst := netip.PrefixFrom(netip.AddrFrom4([4]byte{100, byte(i >> 16), byte(i >> 8), byte(i)}), 32)
	return &vppmodel.Route{DstNetwork: dst.String(), Paths: []*vppmodel.Path{{OutgoingInterface: "up", NextHop: nh}}}
}

func benchLB(i int, backend string) *vppmodel.Nat44LbStaticMapping {
	ext := netip.AddrFrom4([4]byte{172, 16 + byte(i>>16), byte(i >> 8), byte(i)})
	return &vppmodel.Nat44LbStaticMapping{Protocol: vppmodel.Nat44Protocol_TCP, ExternalIp: ext.String(), ExternalPort: 80,
		Out2InOnly: true, Backends: []*vppmodel.Nat44Backend{
			{Ip: "10.1.0.10", Port: 8080, Probability: 50},
			{Ip: backend, Port: 8080, Probability: 50},
		}}
}

// BenchmarkOneKeyCommit measures one update commit that changes one key
// (a route's next hop; one backend of a NAT44 load-balanced mapping; the
// rules of an ACL applied to an interface, replaced in place; one backend
// of a cnat translation of 10), through the
// stand-in, with 1,000 and 100,000 keys installed. Every iteration changes
// VPP (the value alternates between two versions).
func BenchmarkOneKeyCommit(b *testing.B) {
	for _, n := range []int{1000, 100000} {
		for _, tc := range []struct {
			name  string
			a, b  proto.Message
			extra []proto.Message // installed too
		}{
			{"route", benchRoute(7, "10.0.0.2"), benchRoute(7, "10.0.0.3"), nil},
			{"nat44-lb-backend", benchLB(7, "10.1.0.2"), benchLB(7, "10.1.0.3"), nil},
			{"acl-replace", benchACL(7, 80), benchACL(7, 81), []proto.Message{benchACL(7, 80), benchACL(8, 80),
				&vppmodel.ACLInterface{Interface: "pods", Input: []string{"acl-8"}, Output: []string{"acl-7"}}}},
			{"cnat-backend", benchCnat("10.1.0.2"), benchCnat("10.1.0.3"), []proto.Message{benchCnat("10.1.0.2")}},
		} {
			b.Run(fmt.Sprintf("%s/keys=%d", tc.name, n), func(b *testing.B) {
				vpp := vppsim.New(vppsim.Config{})
				cfg := testCfg()
				cfg.HealthInterval = time.Hour
				d := startDriver(b, vpp, cfg)
				require.Eventually(b, d.Connected, 10*time.Second, time.Millisecond)
				state := installed(n - len(tc.extra))
				maps.Copy(state, kv(b, tc.extra...))
				commit(b, d, controller.CommitUpdate, state)
				waitConfigured(b, d, len(state))
				key, err := vppmodel.KeyOf(tc.a)
				require.NoError(b, err)
				va := controller.KeyValuePairs{key: tc.a}
				vb := controller.KeyValuePairs{key: tc.b}
				ctx := context.Background()
				before := vpp.Stats().Writes
				runtime.GC() // not the install's garbage in the timed loop
				b.ResetTimer()
				i := 0
				for b.Loop() {
					v := vb
					if i%2 == 1 {
						v = va
					}
					i++
					if _, err := d.Commit(ctx, &controller.Commit{Kind: controller.CommitUpdate, Values: v}); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				require.Greater(b, vpp.Stats().Writes, before)
				s, _ := d.Status(key)
				require.Equal(b, vppdriver.StateConfigured, s.State, s.String())
			})
		}
	}
}

// benchCnat returns a cnat translation of an IPv6 service with 10
// backends, the last one backend.
func benchCnat(backend string) *vppmodel.CnatTranslation {
	m := &vppmodel.CnatTranslation{Vip: "fd00:96::7", Port: 443, Protocol: vppmodel.ProtoTCP}
	for i := range 9 {
		m.Paths = append(m.Paths, &vppmodel.CnatPath{DstIp: fmt.Sprint("fd00:1::", 10+i), DstPort: 8443})
	}
	m.Paths = append(m.Paths, &vppmodel.CnatPath{DstIp: "fd00:2::" + backend[len("10.1.0."):], DstPort: 8443})
	return m
}

// benchACL returns an ACL of 20 rules (a pod's ingress from a few peer
// prefixes on two ports, and the default permit of the node) whose first
// rule's port is port.
func benchACL(i int, port uint32) *vppmodel.ACL {
	a := &vppmodel.ACL{Name: fmt.Sprint("acl-", i)}
	for j := range 20 {
		a.Rules = append(a.Rules, &vppmodel.ACLRule{Action: vppmodel.ACLRule_PERMIT_REFLECT,
			SrcPrefix: fmt.Sprintf("10.%d.%d.0/24", j, i%256), DstPrefix: "0.0.0.0/0", Protocol: vppmodel.ProtoTCP,
			SrcPortLast: 65535, DstPortFirst: port + uint32(j%2), DstPortLast: port + uint32(j%2)})
	}
	return a
}

// BenchmarkACLReplace5000 replaces a 5000-rule ACL that is applied to an
// interface (in place: acl_add_replace on its index, one request) through
// the stand-in and (with VPP_SH, as root) a real VPP 26.06; the value
// alternates between two versions (one rule differs). requests/op counts
// what the driver sent.
func BenchmarkACLReplace5000(b *testing.B) {
	for _, tc := range []struct {
		name       string
		newAdapter func(b *testing.B) func() adapter.VppAPI
	}{
		{"stand-in", func(*testing.B) func() adapter.VppAPI {
			vpp := vppsim.New(vppsim.Config{})
			return func() adapter.VppAPI { return vpp.NewAdapter() }
		}},
		{"real-VPP", func(b *testing.B) func() adapter.VppAPI {
			sock := vppdrivertest.StartRealVPP(b).APISocket()
			return func() adapter.VppAPI { return socketclient.NewVppClient(sock) }
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			newAdapter := tc.newAdapter(b)
			rec := &vppdrivertest.RequestRecorder{}
			cfg := testCfg()
			cfg.HealthInterval = time.Hour
			cfg.RequestTimeout = 10 * time.Second
			d, err := vppdriver.New(func() adapter.VppAPI { return rec.Wrap(newAdapter()) }, cfg)
			require.NoError(b, err)
			runDriver(b, d)
			require.Eventually(b, func() bool { return d.Stats().Connected }, 20*time.Second, time.Millisecond)
			va, vb := bigACL("big", 5000), bigACL("big", 5000)
			vb.Rules[2500].DstPortLast++
			state := kv(b, loop("pod", true, 0, "10.1.0.1/24"), va, &vppmodel.ACLInterface{Interface: "pod", Output: []string{"big"}})
			commit(b, d, controller.CommitUpdate, state)
			waitConfigured(b, d, len(state))
			values := [2]controller.KeyValuePairs{kv(b, vb), kv(b, va)}
			ctx := context.Background()
			rec.Take()
			runtime.GC()
			b.ResetTimer()
			i := 0
			for b.Loop() {
				if _, err := d.Commit(ctx, &controller.Commit{Kind: controller.CommitUpdate, Values: values[i%2]}); err != nil {
					b.Fatal(err)
				}
				i++
			}
			b.StopTimer()
			b.ReportMetric(float64(len(rec.Take()))/float64(i), "requests/op")
			s, _ := d.Status(vppmodel.ACLKey("big"))
			require.Equal(b, vppdriver.StateConfigured, s.State, s.String())
		})
	}
}
