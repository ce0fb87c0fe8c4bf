package demo

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseNATMapping(t *testing.T) {
	ap := netip.MustParseAddrPort
	for _, tc := range []struct {
		line    string
		want    NATMapping
		wantErr string
	}{
		{line: "tcp 10.96.0.11:80 -> 10.1.1.3:8080 out2in-only self-twice-nat",
			want: NATMapping{Protocol: "tcp", Frontend: ap("10.96.0.11:80"), Backends: []Backend{{Addr: ap("10.1.1.3:8080")}},
				Flags: []string{"out2in-only", "self-twice-nat"}}},
		{line: "tcp 10.96.0.10:80 -> 10.1.1.3:8080/2 10.1.1.4:8080/1 out2in-only twice-nat",
			want: NATMapping{Protocol: "tcp", Frontend: ap("10.96.0.10:80"),
				Backends: []Backend{{Addr: ap("10.1.1.3:8080"), Probability: 2}, {Addr: ap("10.1.1.4:8080"), Probability: 1}},
				Flags:    []string{"out2in-only", "twice-nat"}}},
		{line: "udp 192.0.2.1:53 -> 10.1.1.3:53 vrf 2",
			want: NATMapping{Protocol: "udp", Frontend: ap("192.0.2.1:53"), Backends: []Backend{{Addr: ap("10.1.1.3:53")}}}},
		{line: "tcp 10.96.0.10:80 -> 10.1.1.3:8080/2@vrf3 10.1.1.4:8080/2",
			want: NATMapping{Protocol: "tcp", Frontend: ap("10.96.0.10:80"),
				Backends: []Backend{{Addr: ap("10.1.1.3:8080"), Probability: 2}, {Addr: ap("10.1.1.4:8080"), Probability: 2}}}},
		{line: "", wantErr: "want"},
		{line: "tcp 10.96.0.10:80 10.1.1.3:8080 x", wantErr: "want"},
		{line: "tcp if:uplink:80 -> 10.1.1.3:8080", wantErr: "frontend"},
		{line: "tcp 10.96.0.10:80 -> out2in-only", wantErr: "no backend"},
		{line: "tcp 10.96.0.10:80 -> 10.1.1.3:8080/x", wantErr: "bad probability"},
	} {
		t.Run(tc.line, func(t *testing.T) {
			got, err := parseNATMapping(tc.line)
			if tc.wantErr != "" {
				assert.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

// FuzzParseNATMapping: any line is parsed or refused, never a panic; a
// parsed mapping has a frontend and backends.
func FuzzParseNATMapping(f *testing.F) {
	f.Add("tcp 10.96.0.10:80 -> 10.1.1.3:8080/2 10.1.1.4:8080/2 out2in-only self-twice-nat")
	f.Add("tcp 10.96.0.11:80 -> 10.1.1.3:8080 vrf 1 out2in-only")
	f.Add("udp 1.2.3.4:1 -> 5.6.7.8:9/0@vrf1 vrf")
	f.Fuzz(func(t *testing.T, line string) {
		m, err := parseNATMapping(line)
		if err != nil {
			return
		}
		if !m.Frontend.IsValid() || len(m.Backends) == 0 {
			t.Fatalf("%q parsed into %+v", line, m)
		}
		for _, b := range m.Backends {
			if !b.Addr.IsValid() || b.Probability < 0 {
				t.Fatalf("%q: bad backend %+v", line, b)
			}
		}
	})
}

func TestDiffSummaries(t *testing.T) {
	pfx := netip.MustParsePrefix
	node := func(name string, pods ...string) NodeSummary {
		n := NodeSummary{Name: name, ID: 1, PodSubnet: pfx("10.1.1.0/24")}
		for i, p := range pods {
			n.Pods = append(n.Pods, PodSummary{Name: p, IP: netip.AddrFrom4([4]byte{10, 1, 1, byte(2 + i)})})
		}
		return n
	}
	for _, tc := range []struct {
		name   string
		before Summary
		after  Summary
		want   []DiffLine
	}{
		{name: "same", before: Summary{Nodes: []NodeSummary{node("n1", "a")}}, after: Summary{Nodes: []NodeSummary{node("n1", "a")}}},
		{name: "pod replaced",
			before: Summary{Nodes: []NodeSummary{node("n1", "a", "b")}},
			after:  Summary{Nodes: []NodeSummary{node("n1", "a", "c")}},
			want: []DiffLine{{Section: "node n1", Op: "-", Text: "pod b 10.1.1.3 -"},
				{Section: "node n1", Op: "+", Text: "pod c 10.1.1.3 -"}}},
		{name: "node gone",
			before: Summary{Nodes: []NodeSummary{node("n1"), node("n2", "x")}},
			after:  Summary{Nodes: []NodeSummary{node("n1")}},
			want: []DiffLine{{Section: "node n2", Op: "-", Text: "n2: ID 1, pod subnet 10.1.1.0/24, VPP address invalid IP, InternalIP invalid IP, BGP speaker invalid AddrPort"},
				{Section: "node n2", Op: "-", Text: "pod x 10.1.1.2 -"}}},
		{name: "duplicate lines count",
			before: Summary{Nodes: []NodeSummary{node("n1", "a")}},
			after:  Summary{Nodes: []NodeSummary{{Name: "n1", ID: 1, PodSubnet: pfx("10.1.1.0/24"), Pods: []PodSummary{{Name: "a", IP: netip.MustParseAddr("10.1.1.2")}, {Name: "a", IP: netip.MustParseAddr("10.1.1.2")}}}}},
			want:   []DiffLine{{Section: "node n1", Op: "+", Text: "pod a 10.1.1.2 -"}}},
		{name: "title changed",
			before: Summary{Nodes: []NodeSummary{node("n1")}},
			after:  Summary{Nodes: []NodeSummary{{Name: "n1", ID: 2, PodSubnet: pfx("10.1.2.0/24")}}},
			want: []DiffLine{{Section: "node n1", Op: "-", Text: "n1: ID 1, pod subnet 10.1.1.0/24, VPP address invalid IP, InternalIP invalid IP, BGP speaker invalid AddrPort"},
				{Section: "node n1", Op: "+", Text: "n1: ID 2, pod subnet 10.1.2.0/24, VPP address invalid IP, InternalIP invalid IP, BGP speaker invalid AddrPort"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, diffSummaries(tc.before, tc.after))
			var b strings.Builder
			require.NoError(t, writeDiff(&b, tc.want))
			for _, d := range tc.want {
				assert.Contains(t, b.String(), "    "+d.Op+" "+d.Text+"\n")
			}
		})
	}
}

func TestOptions(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      Options
		check   func(*testing.T, Options)
		wantErr string
	}{
		{name: "zero", check: func(t *testing.T, o Options) {
			assert.Equal(t, DefaultNodes, o.Nodes)
			assert.Equal(t, DefaultPodsPerNode, o.PodsPerNode)
			assert.Equal(t, DefaultServices, o.Services)
			assert.Equal(t, DefaultTimeout, o.Timeout)
			assert.NotNil(t, o.Progress)
			assert.NotNil(t, o.Logger)
			assert.False(t, o.Live, "no live bars without a progress writer")
		}},
		{name: "given", in: Options{Nodes: 20, PodsPerNode: 1, Services: 7, Timeout: time.Second}, check: func(t *testing.T, o Options) {
			assert.Equal(t, 20, o.Nodes)
			assert.Equal(t, 1, o.PodsPerNode)
			assert.Equal(t, 7, o.Services)
			assert.Equal(t, time.Second, o.Timeout)
		}},
		{name: "too many nodes", in: Options{Nodes: MaxNodes + 1}, wantErr: "nodes: 241 is not in 1..240"},
		{name: "negative", in: Options{PodsPerNode: -1, Services: -2, RunFor: -1, Timeout: -1},
			wantErr: "pods per node: -1 is not in 1..200\nservices: -2 is not in 1..200\nrun-for: -1ns is negative\ntimeout: -1ns is negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.in.withDefaults()
			if tc.wantErr != "" {
				assert.EqualError(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			tc.check(t, got)
		})
	}
}

func TestComparePodNames(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int // sign
	}{
		{"web-2", "web-10", -1},
		{"web-10", "web-2", 1},
		{"web-2", "web-2", 0},
		{"api-9", "web-0", -1},
		{"node-3", "node-12", -1},
		{"web", "web-1", -1},
		{"", "a", -1},
	} {
		got := comparePodNames(tc.a, tc.b)
		assert.Equal(t, tc.want, sign(got), "%q vs %q", tc.a, tc.b)
	}
}

func sign(n int) int {
	switch {
	case n < 0:
		return -1
	case n > 0:
		return 1
	}
	return 0
}

func TestServiceKinds(t *testing.T) {
	s := newService(0)
	assert.Equal(t, KindClusterIP, s.kind)
	assert.Zero(t, s.nodePort)
	s = newService(4)
	assert.Equal(t, "edge", s.name)
	assert.True(t, s.local)
	assert.Equal(t, netip.MustParseAddr("198.51.100.14"), s.lbIP)
	s = newService(7)
	assert.Equal(t, "shop-2", s.name)
	assert.Equal(t, KindLoadBalancer, s.kind)
	assert.Equal(t, netip.MustParseAddr("10.96.0.17"), s.clusterIP)
	svc := serviceObject(newService(4))
	assert.Equal(t, "Local", string(svc.Spec.ExternalTrafficPolicy))
	assert.Equal(t, "198.51.100.14", svc.Status.LoadBalancer.Ingress[0].IP)
}
