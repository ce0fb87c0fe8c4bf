package config_test

import (
	"errors"
	"flag"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vswitchkit/vswitchkit/embedetcd/etcdtest"
	"github.com/vswitchkit/vswitchkit/examples/vswitch/internal/config"
)

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
	return p
}

// TestLoadFullFile: every section of a complete file lands in its field,
// durations are strings, flags override the file.
func TestLoadFullFile(t *testing.T) {
	certs, err := etcdtest.GenerateCerts(t.TempDir())
	require.NoError(t, err)
	pwFile := writeFile(t, "pw", "s3cret\n")
	file := writeFile(t, "vswitch.yaml", `
nodeName: node-1
stateDir: /var/lib/vsk
etcd:
  endpoints: [https://127.0.0.1:2379, "10.0.0.2:2379"]
  caFile: `+certs.CAFile+`
  certFile: `+certs.ClientCert+`
  keyFile: `+certs.ClientKey+`
  username: vswitchkit
  passwordFile: `+pwFile+`
  dialTimeout: 3s
vpp:
  mode: socket
  apiSocket: /run/vpp/api.sock
ipam:
  podSubnetCIDR: 10.2.0.0/16
  podSubnetOneNodePrefixLen: 25
  serviceCIDR: 10.97.0.0/16
  storeTimeout: 2s
ipamStore: etcd
ipFamily: dual
ipam6:
  podSubnetCIDR: fd00:2::/104
services: nat44
podInterfaceType: memif
cniSocket: /run/vsk/cni.sock
uplink:
  afPacketHostIf: eth1
  address: 192.168.16.5/24
  macAddress: "02:00:00:00:00:05"
hostInterconnect:
  afPacketHostIf: vpp1
bgp:
  listenAddresses: [192.168.16.5]
  ipv4: 192.168.16.5
http:
  listen: 0.0.0.0:9482
log:
  format: json
  level: debug
healingDelay: 2s
stopTimeout: 1m
`)
	cfg, err := config.Load([]string{"-config", file, "-log-level", "warn", "-etcd-endpoints", "https://127.0.0.1:2379", "-bgp-disabled", "-services", "cnat"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, "node-1", cfg.NodeName)
	assert.Equal(t, []string{"https://127.0.0.1:2379"}, cfg.Etcd.Endpoints, "flag wins")
	assert.Equal(t, config.Duration(3*time.Second), cfg.Etcd.DialTimeout)
	assert.Equal(t, "warn", cfg.Log.Level, "flag wins")
	assert.Equal(t, "json", cfg.Log.Format)
	assert.True(t, cfg.BGP.Disabled)
	assert.Equal(t, netip.MustParsePrefix("10.2.0.0/16"), cfg.IPAM.PodSubnetCIDR)
	assert.Equal(t, 2*time.Second, cfg.IPAM.StoreTimeout)

	ac := cfg.Agent()
	assert.Equal(t, "eth1", ac.Uplink.AfPacketHostIf)
	assert.Equal(t, netip.MustParsePrefix("192.168.16.5/24"), ac.Uplink.Address)
	assert.Equal(t, "vpp1", ac.HostInterconnect.AfPacketHostIf)
	assert.Equal(t, time.Minute, ac.StopTimeout)
	assert.Equal(t, 2*time.Second, ac.HealingDelay)
	assert.Equal(t, "etcd", ac.IPAMStore)
	assert.Equal(t, "cnat", ac.Services, "flag wins")
	assert.Equal(t, "dual", ac.IPFamily)
	assert.Equal(t, netip.MustParsePrefix("fd00:2::/104"), ac.IPAM6.PodSubnetCIDR)

	cc, err := cfg.EtcdClientConfig()
	require.NoError(t, err)
	assert.Equal(t, "s3cret", cc.Password)
	assert.Equal(t, "vswitchkit", cc.Username)
	require.NotNil(t, cc.TLS)
	assert.Len(t, cc.TLS.Certificates, 1)
}

// TestDefaults: only the node name is needed.
func TestDefaults(t *testing.T) {
	cfg, err := config.Load([]string{"-node-name", "n1"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, config.DefaultStateDir, cfg.StateDir)
	assert.Equal(t, []string{config.DefaultEtcdEndpoint}, cfg.Etcd.Endpoints)
	assert.Equal(t, config.VPPSocket, cfg.VPP.Mode)
	assert.Equal(t, config.DefaultVPPSocket, cfg.VPP.APISocket)
	assert.Equal(t, config.LinuxNetlink, cfg.Linux)
	assert.Equal(t, config.DefaultHTTPListen, cfg.HTTP.Listen)
	assert.Equal(t, "text", cfg.Log.Format)
	cc, err := cfg.EtcdClientConfig()
	require.NoError(t, err)
	assert.Nil(t, cc.TLS)
	assert.Empty(t, cc.Username)
}

// TestBadConfig: each bad file or flag gives an error that names the
// field and says why; every problem of a file is reported.
func TestBadConfig(t *testing.T) {
	cases := []struct {
		name string
		file string
		args []string
		want []string
	}{
		{"no node name", "etcd: {endpoints: [127.0.0.1:2379]}\n", nil, []string{"nodeName: required"}},
		{"unknown field", "nodeName: n1\nnodeNam: n1\n", nil, []string{"nodeNam: unknown field"}},
		{"unknown nested field", "nodeName: n1\netcd:\n  endpoint: x\n", nil, []string{"etcd.endpoint: unknown field"}},
		{"duplicate key", "nodeName: n1\nnodeName: n2\n", nil, []string{"nodeName: duplicate key (lines 1 and 2)"}},
		{"not YAML", "nodeName: [n1\n", nil, []string{"not valid YAML"}},
		{"wrong type", "nodeName: n1\nipamStore: [bolt]\n", nil, []string{"ipamStore: cannot unmarshal array"}},
		{"bad prefix", "nodeName: n1\nipam:\n  podSubnetCIDR: 10.1.0.0/33\n", nil, []string{"ipam.podSubnetCIDR:", "10.1.0.0/33"}},
		{"prefix with host bits", "nodeName: n1\nipam:\n  podSubnetCIDR: 10.1.0.1/16\n", nil, []string{"ipam.podSubnetCIDR: 10.1.0.1/16: has host bits set"}},
		{"bad duration", "nodeName: n1\netcd:\n  dialTimeout: 5\n", nil, []string{`etcd.dialTimeout: want a duration such as "5s"`}},
		{"bad ipam duration", "nodeName: n1\nipam:\n  storeTimeout: soon\n", nil, []string{`ipam.storeTimeout: want a duration`, `"soon"`}},
		{"bad endpoint", "nodeName: n1\netcd:\n  endpoints: [127.0.0.1:2379, 'ftp://x:1']\n", nil, []string{"etcd.endpoints[1]:", "ftp"}},
		{"bad listen address", "nodeName: n1\nbgp:\n  listenAddresses: [10.0.0.1, nope]\n", nil, []string{"bgp.listenAddresses[1]:"}},
		{"missing CA file", "nodeName: n1\netcd:\n  caFile: /nonexistent/ca.pem\n", nil, []string{"etcd.caFile:", "no such file"}},
		{"cert without key", "nodeName: n1\netcd:\n  certFile: /x.pem\n", nil, []string{"etcd.keyFile: required with etcd.certFile"}},
		{"user without password", "nodeName: n1\netcd:\n  username: u\n", nil, []string{"etcd.password: required with etcd.username"}},
		{"fake linux with real VPP", "nodeName: n1\nlinux: fake\n", nil, []string{`linux: "fake" is only for the VPP stand-in`}},
		{"bad vpp mode", "nodeName: n1\nvpp:\n  mode: shm\n", nil, []string{`vpp.mode: "shm"`}},
		{"relative socket", "nodeName: n1\ncniSocket: cni.sock\n", nil, []string{`cniSocket: "cni.sock" is not an absolute path`}},
		{"pod interface type", "nodeName: n1\npodInterfaceType: veth\n", nil, []string{"podInterfaceType:"}},
		{"uplink both", "nodeName: n1\nuplink: {afPacketHostIf: eth1, vppName: Gig0}\n", nil, []string{"uplink: set afPacketHostIf or vppName, not both"}},
		{"bad MAC", "nodeName: n1\nhostInterconnect: {afPacketHostIf: vpp1, macAddress: zz}\n", nil, []string{"hostInterconnect.macAddress:"}},
		{"bad http listen", "nodeName: n1\nhttp: {listen: localhost}\n", nil, []string{"http.listen:"}},
		{"bad log level", "nodeName: n1\nlog: {level: loud, format: xml}\n", nil, []string{"log.level:", "log.format:"}},
		{"bad node name", "nodeName: Node_1\n", nil, []string{"nodeName:", "Node_1"}},
		{"bad flag value", "nodeName: n1\n", []string{"-bgp-ipv4", "x"}, []string{"bgp.ipv4 (-bgp-ipv4):"}},
		{"unknown flag", "nodeName: n1\n", []string{"-no-such-flag"}, []string{"flag provided but not defined: -no-such-flag"}},
		{"nat44 in an ipv6 cluster", "nodeName: n1\nipFamily: ipv6\n", nil, []string{`services: "nat44" translates IPv4 only: an "ipv6" cluster needs "cnat"`}},
		{"bad services and family flags", "nodeName: n1\n", []string{"-services", "ipvs", "-ip-family", "ipv5"}, []string{`services: "ipvs" is none of`, `ipFamily: "ipv5" is none of`}},
		{"ipv4 range in the ipv6 plan", "nodeName: n1\nipFamily: dual\nservices: cnat\nipam6:\n  serviceCIDR: 10.96.0.0/12\n", nil, []string{"ipam6.serviceCIDR: 10.96.0.0/12 is not IPv6"}},
		{"several at once", "nodeName: n1\nstateDir: rel\nipam:\n  serviceCIDR: 10.96.0.1/12\nhttp: {listen: x}\n", nil,
			[]string{"stateDir:", "ipam.serviceCIDR:", "http.listen:"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			file := writeFile(t, "vswitch.yaml", tc.file)
			_, err := config.Load(append([]string{"-config", file}, tc.args...), io.Discard)
			require.Error(t, err)
			var ce *config.Error
			require.ErrorAs(t, err, &ce)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

// Negative durations are named once each: the daemon's checks and the
// agent's do not both report them.
func TestNegativeDurationsReportedOnce(t *testing.T) {
	file := writeFile(t, "vswitch.yaml", "nodeName: n1\nhealingDelay: -1s\nmaxHealingDelay: -2s\nlocalFallbackDelay: -3s\n")
	_, err := config.Load([]string{"-config", file}, io.Discard)
	require.Error(t, err)
	for _, w := range []string{"healingDelay: -1s is negative", "maxHealingDelay: -2s is negative", "localFallbackDelay: -3s is negative"} {
		assert.Equal(t, 1, strings.Count(err.Error(), w), "%q in %v", w, err)
	}
}

func TestHelpAndMissingFile(t *testing.T) {
	var usage strings.Builder
	_, err := config.Load([]string{"-h"}, &usage)
	require.ErrorIs(t, err, flag.ErrHelp)
	assert.Contains(t, usage.String(), "-etcd-endpoints")
	assert.Contains(t, usage.String(), "(etcd.endpoints; default: 127.0.0.1:2379)", "flags name their field and default")
	for _, f := range config.Flags() {
		i := strings.Index(usage.String(), "  "+f[0]+" ")
		if i < 0 {
			i = strings.Index(usage.String(), "  "+f[0]+"\n")
		}
		require.GreaterOrEqual(t, i, 0, "%s in the usage", f[0])
		line, _, _ := strings.Cut(usage.String()[i:], "\n  -")
		assert.Contains(t, line, "("+f[1]+"; default: ", "%s names its field and default", f[0])
	}
	assert.Contains(t, usage.String(), config.ExitStatuses)
	for _, d := range []string{config.DefaultHTTPListen, config.DefaultStateDir, config.DefaultVPPSocket, "/run/vswitchkit/cni.sock", "af_packet", "5s"} {
		assert.Contains(t, usage.String(), "default: "+d+")")
	}

	_, err = config.Load([]string{"-config", "/nonexistent/vswitch.yaml"}, io.Discard)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "/nonexistent/vswitch.yaml")
	assert.True(t, errors.Is(err, os.ErrNotExist))
	var ce *config.Error
	require.ErrorAs(t, err, &ce)
	assert.True(t, ce.FilesOnly(), "a missing file is the machine's problem")
}

// TestEveryProblemAtOnce: the command line's, the file's (duplicate and
// unknown keys, wrong types) and the values' problems are reported
// together, each once (issue 27, item 6: they came in three rounds, the
// README's three-problem example reported one).
func TestEveryProblemAtOnce(t *testing.T) {
	t.Run("the README's example", func(t *testing.T) {
		file := writeFile(t, "vswitch.yaml", "nodeName: n1\ncniSockett: /run/x.sock\nipam:\n  serviceCIDR: 10.96.0.1/12\netcd:\n  caFile: /nonexistent/etcd/ca.crt\n")
		_, err := config.Load([]string{"-config", file}, io.Discard)
		var ce *config.Error
		require.ErrorAs(t, err, &ce)
		require.Len(t, ce.Problems, 3, "%v", err)
		assert.Equal(t, "cniSockett: unknown field", ce.Problems[0].Error())
		assert.Equal(t, "etcd.caFile: open /nonexistent/etcd/ca.crt: no such file or directory", ce.Problems[1].Error())
		assert.Equal(t, "ipam.serviceCIDR: 10.96.0.1/12: has host bits set (network is 10.96.0.0/12)", ce.Problems[2].Error())
		assert.False(t, ce.FilesOnly())
	})
	t.Run("every kind", func(t *testing.T) {
		file := writeFile(t, "vswitch.yaml", `nodeName: [n1]
stateDir: /var/lib/a
stateDir: /var/lib/b
nodeNam: n1
etcd:
  endpoints: [127.0.0.1:2379, ftp://x:1]
  dialTimeout: 5
ipam:
  podSubnetCIDR: 10.1.0.1/16
http: {listen: nowhere}
`)
		_, err := config.Load([]string{"-config", file, "-bgp-ipv4", "x", "-log-level", "loud"}, io.Discard)
		var ce *config.Error
		require.ErrorAs(t, err, &ce)
		var got []string
		for _, p := range ce.Problems {
			got = append(got, p.Error())
		}
		want := []string{
			"stateDir: duplicate key (lines 2 and 3)",
			"etcd.dialTimeout: want a duration",
			"nodeName: cannot unmarshal array",
			"nodeNam: unknown field",
			"bgp.ipv4 (-bgp-ipv4):",
			"etcd.endpoints[1]:",
			"http.listen:",
			"log.level:",
			"ipam.podSubnetCIDR: 10.1.0.1/16: has host bits set",
		}
		for _, w := range want {
			assert.Equal(t, 1, countPrefix(got, w), "%q once in %q", w, got)
		}
		assert.Len(t, got, len(want), "nothing else (a field that did not decode is not checked again): %q", got)
	})
	t.Run("an unreadable command line stops the checks of the values", func(t *testing.T) {
		file := writeFile(t, "vswitch.yaml", "nodeName: n1\nnodeNam: x\n")
		_, err := config.Load([]string{"-config", file, "-no-such-flag", "-node-name", "n2"}, io.Discard)
		var ce *config.Error
		require.ErrorAs(t, err, &ce)
		require.Len(t, ce.Problems, 2, "%v", err)
		assert.Contains(t, ce.Problems[0].Error(), "flag provided but not defined: -no-such-flag (vswitch -h lists the flags)")
		assert.Equal(t, "nodeNam: unknown field", ce.Problems[1].Error())
	})
	t.Run("only files", func(t *testing.T) {
		file := writeFile(t, "vswitch.yaml", "nodeName: n1\netcd:\n  caFile: /nonexistent/ca.pem\n  username: u\n  passwordFile: /nonexistent/pw\n")
		_, err := config.Load([]string{"-config", file}, io.Discard)
		var ce *config.Error
		require.ErrorAs(t, err, &ce)
		require.Len(t, ce.Problems, 2, "%v", err)
		assert.True(t, ce.FilesOnly(), "%v", err)
	})
}

func countPrefix(ss []string, prefix string) int {
	n := 0
	for _, s := range ss {
		if strings.HasPrefix(s, prefix) {
			n++
		}
	}
	return n
}

// FuzzDecode: any document decodes or fails with an error; never a panic.
func FuzzDecode(f *testing.F) {
	for _, seed := range []string{
		"nodeName: n1\n", "etcd: {endpoints: [a, b]}\n", "ipam: {podSubnetCIDR: 10.0.0.0/8}\n",
		"bgp: {listenAddresses: [::1]}\nhealingDelay: 1s\n", "- a\n- b\n", "null\n", "etcd: 5\n",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		var cfg config.Config
		_ = config.Decode([]byte(doc), &cfg)
		_ = cfg.Validate()
	})
}
