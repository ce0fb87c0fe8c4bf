package ipam_test

import (
	"encoding/json"
	"errors"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/controllertest"
	"github.com/vswitchkit/vswitchkit/ipam"
	"github.com/vswitchkit/vswitchkit/ipam/ipamtest"
)

func TestBadConfigs(t *testing.T) {
	cases := []struct {
		name  string
		cfg   ipam.Config
		field string // Config field of the (first) ConfigError
		msg   string // substring of the error
	}{
		{"per-node prefix equal to all-nodes prefix", ipam.Config{PodSubnetOneNodePrefixLen: 16},
			"PodSubnetOneNodePrefixLen", "must be longer than the all-nodes prefix 10.1.0.0/16"},
		{"per-node prefix shorter", ipam.Config{VPPHostSubnetOneNodePrefixLen: 12},
			"VPPHostSubnetOneNodePrefixLen", "must be longer"},
		{"per-node pod prefix too long", ipam.Config{PodSubnetOneNodePrefixLen: 31},
			"PodSubnetOneNodePrefixLen", "at most /30"},
		{"per-node host prefix too long", ipam.Config{VPPHostSubnetOneNodePrefixLen: 30},
			"VPPHostSubnetOneNodePrefixLen", "at most /29"},
		{"ipv6 pod subnet with default per-node len too short", ipam.Config{PodSubnetCIDR: pfx("fd00::/120")},
			"PodSubnetOneNodePrefixLen", "must be longer than the all-nodes prefix fd00::/120"},
		{"pod overlaps vpp-host", ipam.Config{PodSubnetCIDR: pfx("172.30.0.0/16")},
			"VPPHostSubnetCIDR", "overlaps PodSubnetCIDR 172.30.0.0/16"},
		{"service overlaps pod", ipam.Config{ServiceCIDR: pfx("10.0.0.0/8")},
			"ServiceCIDR", "overlaps PodSubnetCIDR"},
		{"vxlan overlaps node interconnect", ipam.Config{VXLANCIDR: pfx("192.168.16.128/25")},
			"VXLANCIDR", "overlaps NodeInterconnectCIDR 192.168.16.0/24"},
		{"host bits set", ipam.Config{PodSubnetCIDR: pfx("10.1.2.3/16")},
			"PodSubnetCIDR", "host bits set (network is 10.1.0.0/16)"},
		{"invalid prefix length", ipam.Config{ServiceCIDR: netip.PrefixFrom(netip.MustParseAddr("10.0.0.0"), 33)},
			"ServiceCIDR", "not a valid CIDR"},
		{"negative prefix length", ipam.Config{VXLANCIDR: netip.PrefixFrom(netip.MustParseAddr("fe80::"), -1)},
			"VXLANCIDR", "not a valid CIDR"},
		{"4in6", ipam.Config{VXLANCIDR: pfx("::ffff:10.9.0.0/112")},
			"VXLANCIDR", "IPv4-mapped"},
		{"gateway zone", ipam.Config{DefaultGateway: netip.MustParseAddr("fe80::1%eth0")},
			"DefaultGateway", "zone"},
		{"gateway is network address", ipam.Config{DefaultGateway: netip.MustParseAddr("192.168.16.0")},
			"DefaultGateway", "network or broadcast"},
		{"gateway is broadcast", ipam.Config{DefaultGateway: netip.MustParseAddr("192.168.16.255")},
			"DefaultGateway", "network or broadcast"},
		{"gateway of the wrong family", ipam.Config{DefaultGateway: netip.MustParseAddr("fd00::1")},
			"DefaultGateway", "not in NodeInterconnectCIDR 192.168.16.0/24"},
		{"gateway outside the interconnect", ipam.Config{DefaultGateway: netip.MustParseAddr("10.0.0.1")},
			"DefaultGateway", "not in NodeInterconnectCIDR 192.168.16.0/24"},
		{"gateway outside the single-CIDR interconnect", ipam.Config{SingleCIDR: pfx("10.128.0.0/14"), DefaultGateway: netip.MustParseAddr("192.168.16.1")},
			"DefaultGateway", "not in NodeInterconnectCIDR 10.130.0.0/23"},
		{"gateway with dhcp", ipam.Config{NodeInterconnectDHCP: true, DefaultGateway: netip.MustParseAddr("192.168.16.1")},
			"DefaultGateway", "must be unset when NodeInterconnectDHCP is on"},
		{"interconnect too small", ipam.Config{NodeInterconnectCIDR: pfx("192.168.16.0/31")},
			"NodeInterconnectCIDR", "too small"},
		{"vxlan too small", ipam.Config{VXLANCIDR: pfx("192.168.30.0/32")},
			"VXLANCIDR", "too small"},
		{"dhcp with cidr", ipam.Config{NodeInterconnectDHCP: true, NodeInterconnectCIDR: pfx("192.168.16.0/24")},
			"NodeInterconnectCIDR", "unset when NodeInterconnectDHCP"},
		{"single cidr too small", ipam.Config{SingleCIDR: pfx("10.128.0.0/15")},
			"SingleCIDR", "at most /14"},
		{"single cidr with pod subnet", ipam.Config{SingleCIDR: pfx("10.128.0.0/14"), PodSubnetCIDR: pfx("10.1.0.0/16")},
			"PodSubnetCIDR", "unset in single-CIDR mode"},
		{"single cidr with per-node len", ipam.Config{SingleCIDR: pfx("10.128.0.0/14"), PodSubnetOneNodePrefixLen: 24},
			"PodSubnetOneNodePrefixLen", "unset or 25"},
		{"single cidr overlapping service", ipam.Config{SingleCIDR: pfx("10.96.0.0/12")},
			"ServiceCIDR", "overlaps"},
		{"external without node name", ipam.Config{ExternalIPAM: true, EventLoop: &controllertest.EventRecorder{}},
			"NodeName", "required with ExternalIPAM"},
		{"external without event loop", ipam.Config{ExternalIPAM: true, NodeName: "n1"},
			"EventLoop", "required with ExternalIPAM"},
		{"negative store timeout", ipam.Config{StoreTimeout: -1},
			"StoreTimeout", "must not be negative"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ipam.New(ipamtest.NewNodeID(1), tc.cfg)
			require.Error(t, err)
			require.ErrorIs(t, err, ipam.ErrInvalidConfig)
			var ce *ipam.ConfigError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, tc.field, ce.Field, "error: %v", err)
			assert.ErrorContains(t, err, tc.msg)
		})
	}
}

func TestConfigReportsEveryProblem(t *testing.T) {
	_, err := ipam.New(ipamtest.NewNodeID(1), ipam.Config{
		PodSubnetOneNodePrefixLen: 8,
		ServiceCIDR:               pfx("172.30.0.0/24"),
		StoreTimeout:              -5,
	})
	require.Error(t, err)
	joined, ok := err.(interface{ Unwrap() []error })
	require.True(t, ok, "errors.Join result expected: %v", err)
	var fields []string
	for _, e := range joined.Unwrap() {
		var ce *ipam.ConfigError
		require.True(t, errors.As(e, &ce))
		fields = append(fields, ce.Field)
	}
	assert.ElementsMatch(t, []string{"StoreTimeout", "PodSubnetOneNodePrefixLen", "ServiceCIDR"}, fields)
}

func TestNilNodeIDSource(t *testing.T) {
	_, err := ipam.New(nil, ipam.Config{})
	require.Error(t, err)
}

func TestConfigJSON(t *testing.T) {
	var cfg ipam.Config
	require.NoError(t, json.Unmarshal([]byte(`{
		"podSubnetCIDR": "10.2.0.0/16", "podSubnetOneNodePrefixLen": 25,
		"vppHostSubnetCIDR": "172.31.0.0/16",
		"nodeInterconnectCIDR": "192.168.40.0/24", "defaultGateway": "192.168.40.1",
		"vxlanCIDR": "192.168.41.0/24", "serviceCIDR": "10.97.0.0/16"}`), &cfg))
	i := newReady(t, 3, cfg)
	assert.Equal(t, "10.2.1.128/25", i.PodSubnetThisNode().String())
	ip, _, err := i.NodeIPAddress(3)
	require.NoError(t, err)
	assert.Equal(t, "192.168.40.4", ip.String())

	// Unparsable CIDRs fail when the config is loaded.
	for _, bad := range []string{
		`{"podSubnetCIDR": "10.2.0.0/33"}`,
		`{"vxlanCIDR": "banana"}`,
		`{"serviceCIDR": "10.96.0.0"}`,
		`{"defaultGateway": "1.2.3.4/5"}`,
	} {
		var c ipam.Config
		require.Error(t, json.Unmarshal([]byte(bad), &c), bad)
	}
}

func TestNodeIDValidatedAgainstEveryRange(t *testing.T) {
	cases := []struct {
		name string
		cfg  ipam.Config
		id   uint32
		msg  string
	}{
		{"beyond pod capacity", ipam.Config{PodSubnetCIDR: pfx("10.1.0.0/20")}, 16,
			"node ID 16 beyond the capacity of PodSubnetCIDR 10.1.0.0/20 with per-node /24 (node IDs 1..15)"},
		{"beyond vpp-host capacity", ipam.Config{VPPHostSubnetCIDR: pfx("172.30.0.0/22")}, 4,
			"beyond the capacity of VPPHostSubnetCIDR 172.30.0.0/22"},
		{"node IP is broadcast", ipam.Config{NodeInterconnectCIDR: pfx("3.4.5.192/26")}, 63,
			"node ID 63 would get the broadcast address 3.4.5.255 of NodeInterconnectCIDR 3.4.5.192/26"},
		{"node IP outside subnet", ipam.Config{NodeInterconnectCIDR: pfx("3.4.5.192/26")}, 64,
			"node ID 64 falls outside NodeInterconnectCIDR 3.4.5.192/26"},
		{"gateway shift makes broadcast", ipam.Config{NodeInterconnectCIDR: pfx("3.4.5.192/26"), DefaultGateway: netip.MustParseAddr("3.4.5.193")}, 62,
			"broadcast address 3.4.5.255"},
		{"vxlan IP is broadcast", ipam.Config{VXLANCIDR: pfx("4.5.6.192/26")}, 63,
			"of VXLANCIDR 4.5.6.192/26"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			i, err := ipam.New(ipamtest.NewNodeID(tc.id), tc.cfg)
			require.NoError(t, err)
			err = i.Resync(controller.NewDBResync(), controller.NewKubeStateData(), 1, controllertest.NewTxn())
			require.ErrorIs(t, err, ipam.ErrInvalidNodeID)
			require.ErrorContains(t, err, tc.msg)
			assert.Nil(t, i.PodSubnetThisNode(), "not ready after a failed resync")
		})
	}
}
