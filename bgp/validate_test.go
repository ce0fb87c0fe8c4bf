package bgp_test

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vswitchkit/vswitchkit/bgp"
)

func validPolicy() *bgp.PeeringPolicy {
	return &bgp.PeeringPolicy{
		Name: "p",
		VirtualRouters: []bgp.VirtualRouter{{
			LocalASN:      65001,
			ExportPodCIDR: true,
			Neighbors:     []bgp.Neighbor{{PeerAddress: netip.MustParseAddr("10.0.0.1"), PeerASN: 65000}},
		}},
	}
}

func TestWithDefaults(t *testing.T) {
	tests := []struct {
		name string
		in   bgp.Neighbor
		want bgp.Neighbor
	}{
		{
			name: "all defaults",
			in:   bgp.Neighbor{PeerAddress: netip.MustParseAddr("10.0.0.1"), PeerASN: 1},
			want: bgp.Neighbor{PeerAddress: netip.MustParseAddr("10.0.0.1"), PeerASN: 1, PeerPort: 179, EBGPMultihopTTL: 1,
				ConnectRetryTime: 120 * time.Second, HoldTime: 90 * time.Second, KeepaliveTime: 30 * time.Second,
				Families: []bgp.Family{bgp.IPv4Unicast, bgp.IPv6Unicast}},
		},
		{
			name: "keepalive is a third of a given hold time",
			in:   bgp.Neighbor{HoldTime: 9 * time.Second},
			want: bgp.Neighbor{PeerPort: 179, EBGPMultihopTTL: 1, ConnectRetryTime: 120 * time.Second,
				HoldTime: 9 * time.Second, KeepaliveTime: 3 * time.Second, Families: []bgp.Family{bgp.IPv4Unicast, bgp.IPv6Unicast}},
		},
		{
			name: "hold time from a given keepalive",
			in:   bgp.Neighbor{KeepaliveTime: 60 * time.Second},
			want: bgp.Neighbor{PeerPort: 179, EBGPMultihopTTL: 1, ConnectRetryTime: 120 * time.Second,
				HoldTime: 180 * time.Second, KeepaliveTime: 60 * time.Second, Families: []bgp.Family{bgp.IPv4Unicast, bgp.IPv6Unicast}},
		},
		{
			name: "graceful restart time and explicit values kept",
			in: bgp.Neighbor{PeerPort: 1790, EBGPMultihopTTL: 4, ConnectRetryTime: time.Second, GracefulRestart: bgp.GracefulRestart{Enabled: true},
				Families: []bgp.Family{bgp.IPv6Unicast}},
			want: bgp.Neighbor{PeerPort: 1790, EBGPMultihopTTL: 4, ConnectRetryTime: time.Second, HoldTime: 90 * time.Second,
				KeepaliveTime: 30 * time.Second, GracefulRestart: bgp.GracefulRestart{Enabled: true, RestartTime: 120 * time.Second},
				Families: []bgp.Family{bgp.IPv6Unicast}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &bgp.PeeringPolicy{VirtualRouters: []bgp.VirtualRouter{{LocalASN: 1, Neighbors: []bgp.Neighbor{tt.in}}}}
			got := p.WithDefaults()
			assert.Equal(t, tt.want, got.VirtualRouters[0].Neighbors[0])
			assert.Equal(t, tt.in, p.VirtualRouters[0].Neighbors[0], "the input must not change")
		})
	}
	assert.Nil(t, (*bgp.PeeringPolicy)(nil).WithDefaults())

	vr := validPolicy().WithDefaults().VirtualRouters[0]
	assert.Equal(t, []bgp.ServiceAddressType{bgp.LoadBalancerIPAddresses}, vr.ServiceAdvertisements)
	assert.Equal(t, []string{bgp.DefaultLoadBalancerClass}, vr.LoadBalancerClasses)
	p := validPolicy()
	p.VirtualRouters[0].ServiceAdvertisements = []bgp.ServiceAddressType{bgp.ClusterIPAddresses}
	p.VirtualRouters[0].LoadBalancerClasses = []string{"example.com/lb"}
	vr = p.WithDefaults().VirtualRouters[0]
	assert.Equal(t, []bgp.ServiceAddressType{bgp.ClusterIPAddresses}, vr.ServiceAdvertisements, "explicit values kept")
	assert.Equal(t, []string{"example.com/lb"}, vr.LoadBalancerClasses, "explicit values kept")
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(p *bgp.PeeringPolicy)
		fields []string // every field that must be named; nil = valid
	}{
		{name: "valid", mutate: func(*bgp.PeeringPolicy) {}},
		{name: "no virtual routers", mutate: func(p *bgp.PeeringPolicy) { p.VirtualRouters = nil }, fields: []string{"virtualRouters"}},
		{name: "bad node selector", mutate: func(p *bgp.PeeringPolicy) {
			p.NodeSelector = &bgp.LabelSelector{MatchExpressions: []bgp.LabelSelectorRequirement{{Key: "a", Operator: "Like"}}}
		}, fields: []string{"nodeSelector"}},
		{name: "In without values", mutate: func(p *bgp.PeeringPolicy) {
			p.VirtualRouters[0].ServiceSelector = &bgp.LabelSelector{MatchExpressions: []bgp.LabelSelectorRequirement{{Key: "a", Operator: bgp.SelectorOpIn}}}
		}, fields: []string{"virtualRouters[0].serviceSelector"}},
		{name: "service advertisement options", mutate: func(p *bgp.PeeringPolicy) {
			p.VirtualRouters[0].ServiceAdvertisements = []bgp.ServiceAddressType{bgp.ClusterIPAddresses, "NodePort", bgp.ClusterIPAddresses}
			p.VirtualRouters[0].LoadBalancerClasses = []string{"ok.example/lb", "not a class!", "ok.example/lb", ""}
		}, fields: []string{"virtualRouters[0].serviceAdvertisements[1]", "virtualRouters[0].serviceAdvertisements[2]",
			"virtualRouters[0].loadBalancerClasses[1]", "virtualRouters[0].loadBalancerClasses[2]", "virtualRouters[0].loadBalancerClasses[3]"}},
		{name: "all service advertisement types", mutate: func(p *bgp.PeeringPolicy) {
			p.VirtualRouters[0].ServiceAdvertisements = []bgp.ServiceAddressType{bgp.ClusterIPAddresses, bgp.ExternalIPAddresses, bgp.LoadBalancerIPAddresses}
			p.VirtualRouters[0].LoadBalancerClasses = []string{"a", "example.com/b"}
		}},
		{name: "zero and duplicate ASN", mutate: func(p *bgp.PeeringPolicy) {
			p.VirtualRouters = append(p.VirtualRouters, p.VirtualRouters[0].Clone(), bgp.VirtualRouter{})
		}, fields: []string{"virtualRouters[1].localASN", "virtualRouters[2].localASN"}},
		{name: "every neighbor field bad at once", mutate: func(p *bgp.PeeringPolicy) {
			p.VirtualRouters[0].Neighbors = []bgp.Neighbor{{
				PeerAddress:      netip.Addr{},
				EBGPMultihopTTL:  1,
				PeerPort:         179,
				ConnectRetryTime: 1500 * time.Millisecond,
				HoldTime:         2 * time.Second,
				KeepaliveTime:    time.Second,
				GracefulRestart:  bgp.GracefulRestart{Enabled: true, RestartTime: 5000 * time.Second},
				Password:         strings.Repeat("x", 81),
				Families:         []bgp.Family{"l2vpn-evpn", bgp.IPv4Unicast, bgp.IPv4Unicast},
			}}
		}, fields: []string{".peerAddress", ".peerASN", ".connectRetryTime", ".holdTime", ".gracefulRestart.restartTime",
			".password", ".families[0]", ".families[2]"}},
		{name: "keepalive above hold time", mutate: func(p *bgp.PeeringPolicy) {
			p.VirtualRouters[0].Neighbors[0].HoldTime = 9 * time.Second
			p.VirtualRouters[0].Neighbors[0].KeepaliveTime = 10 * time.Second
		}, fields: []string{"neighbors[0].keepaliveTime"}},
		{name: "keepalive zero after defaults", mutate: func(p *bgp.PeeringPolicy) {
			p.VirtualRouters[0].Neighbors[0].KeepaliveTime = 0
		}, fields: []string{"neighbors[0].keepaliveTime"}},
		{name: "hold time zero is not supported", mutate: func(p *bgp.PeeringPolicy) {
			p.VirtualRouters[0].Neighbors[0].HoldTime = 0
		}, fields: []string{"neighbors[0].holdTime"}},
		{name: "fractional seconds", mutate: func(p *bgp.PeeringPolicy) {
			p.VirtualRouters[0].Neighbors[0].KeepaliveTime = 1500 * time.Millisecond
		}, fields: []string{"neighbors[0].keepaliveTime"}},
		{name: "hold time too long", mutate: func(p *bgp.PeeringPolicy) {
			p.VirtualRouters[0].Neighbors[0].HoldTime = 65536 * time.Second
		}, fields: []string{"neighbors[0].holdTime"}},
		{name: "duplicate peer, zone, family mismatch, ttl", mutate: func(p *bgp.PeeringPolicy) {
			n := p.VirtualRouters[0].Neighbors[0]
			n2 := n
			n2.LocalAddress = netip.MustParseAddr("fd00::1")
			n3 := n
			n3.PeerAddress = netip.MustParseAddr("fe80::1%eth0")
			n3.EBGPMultihopTTL = 0
			n3.PeerPort = 0
			p.VirtualRouters[0].Neighbors = append(p.VirtualRouters[0].Neighbors, n2, n3)
		}, fields: []string{"neighbors[1].peerAddress", "neighbors[1].localAddress", "neighbors[2].peerAddress",
			"neighbors[2].eBGPMultihopTTL", "neighbors[2].peerPort"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := validPolicy().WithDefaults()
			tt.mutate(p)
			err := p.Validate()
			if tt.fields == nil {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			require.ErrorIs(t, err, bgp.ErrInvalidPolicy)
			var fe *bgp.FieldError
			require.True(t, errors.As(err, &fe))
			for _, f := range tt.fields {
				assert.Contains(t, err.Error(), f, "error must name %s", f)
			}
		})
	}
	require.ErrorIs(t, (*bgp.PeeringPolicy)(nil).Validate(), bgp.ErrInvalidPolicy)
}

func TestNeighborEqual(t *testing.T) {
	a := validPolicy().WithDefaults().VirtualRouters[0].Neighbors[0]
	b := a
	b.Families = []bgp.Family{bgp.IPv4Unicast, bgp.IPv6Unicast}
	assert.True(t, a.Equal(b))
	b.Password = "x"
	assert.False(t, a.Equal(b))
}

func TestPolicyCloneIsDeep(t *testing.T) {
	p := validPolicy()
	p.NodeSelector = &bgp.LabelSelector{MatchLabels: map[string]string{"a": "b"},
		MatchExpressions: []bgp.LabelSelectorRequirement{{Key: "k", Operator: bgp.SelectorOpIn, Values: []string{"v"}}}}
	c := p.Clone()
	c.NodeSelector.MatchLabels["a"] = "changed"
	c.NodeSelector.MatchExpressions[0].Values[0] = "changed"
	c.VirtualRouters[0].Neighbors[0].PeerASN = 1
	assert.Equal(t, "b", p.NodeSelector.MatchLabels["a"])
	assert.Equal(t, "v", p.NodeSelector.MatchExpressions[0].Values[0])
	assert.Equal(t, uint32(65000), p.VirtualRouters[0].Neighbors[0].PeerASN)
}

func TestValidateState(t *testing.T) {
	passive := func() *bgp.PeeringPolicy {
		p := validPolicy().WithDefaults()
		p.VirtualRouters[0].Neighbors[0].Passive = true
		return p
	}
	withPort := &bgp.ControlPlaneState{Annotations: bgp.AnnotationMap{65001: {ASN: 65001, LocalPort: 1790}}}
	otherASN := &bgp.ControlPlaneState{Annotations: bgp.AnnotationMap{65002: {ASN: 65002, LocalPort: 1790}}}
	tests := []struct {
		name    string
		policy  *bgp.PeeringPolicy
		state   *bgp.ControlPlaneState
		wantErr string
	}{
		{name: "active neighbor needs no port", policy: validPolicy().WithDefaults(), state: nil},
		{name: "passive with local port", policy: passive(), state: withPort},
		{name: "passive without annotation", policy: passive(), state: &bgp.ControlPlaneState{},
			wantErr: "virtualRouters[0].neighbors[0].passive: neighbor 10.0.0.1 can never connect: the node does not listen for virtual router 65001"},
		{name: "passive, port annotated for another ASN", policy: passive(), state: otherASN, wantErr: "bgp.vswitchkit.io/virtual-router.65001: local-port=<port>"},
		{name: "passive, nil state", policy: passive(), state: nil, wantErr: "can never connect"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.policy.ValidateState(tt.state)
			if tt.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, bgp.ErrInvalidPolicy)
			assert.ErrorContains(t, err, tt.wantErr)
		})
	}
	require.ErrorIs(t, (*bgp.PeeringPolicy)(nil).ValidateState(nil), bgp.ErrInvalidPolicy)
}
