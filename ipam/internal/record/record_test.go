package record

import (
	"bytes"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/ipam"
)

func TestParse(t *testing.T) {
	cases := []struct {
		key, value string
		want       ipam.Allocation // zero: error expected
	}{
		{"default/web-0", "10.1.5.2", ipam.Allocation{Pod: kubemodel.PodID{Namespace: "default", Name: "web-0"}, Addr: netip.MustParseAddr("10.1.5.2")}},
		{"ns/a.b.c", "fd00::2", ipam.Allocation{Pod: kubemodel.PodID{Namespace: "ns", Name: "a.b.c"}, Addr: netip.MustParseAddr("fd00::2")}},
		{"/no-namespace", "10.0.0.1", ipam.Allocation{Pod: kubemodel.PodID{Name: "no-namespace"}, Addr: netip.MustParseAddr("10.0.0.1")}},
		{"ns/mapped", "::ffff:10.0.0.1", ipam.Allocation{Pod: kubemodel.PodID{Namespace: "ns", Name: "mapped"}, Addr: netip.MustParseAddr("10.0.0.1")}},
		{"no-slash", "10.0.0.1", ipam.Allocation{}},
		{"ns/", "10.0.0.1", ipam.Allocation{}},
		{"ns/a/b", "10.0.0.1", ipam.Allocation{}},
		{"ns/a", "", ipam.Allocation{}},
		{"ns/a", "10.0.0.1/24", ipam.Allocation{}},
		{"ns/a", " 10.0.0.1", ipam.Allocation{}},
		{"ns/a", "fe80::1%eth0", ipam.Allocation{}},
		// With the sandbox holding the address.
		{"default/web-0", "10.1.5.2 3f2a9c0e51d4", ipam.Allocation{Pod: kubemodel.PodID{Namespace: "default", Name: "web-0"}, Addr: netip.MustParseAddr("10.1.5.2"), ContainerID: "3f2a9c0e51d4"}},
		{"ns/v6", "fd00::2 c", ipam.Allocation{Pod: kubemodel.PodID{Namespace: "ns", Name: "v6"}, Addr: netip.MustParseAddr("fd00::2"), ContainerID: "c"}},
		{"ns/verbatim", "10.0.0.1 a b\nc ", ipam.Allocation{Pod: kubemodel.PodID{Namespace: "ns", Name: "verbatim"}, Addr: netip.MustParseAddr("10.0.0.1"), ContainerID: "a b\nc "}},
		{"ns/mapped", "::ffff:10.0.0.1 c1", ipam.Allocation{Pod: kubemodel.PodID{Namespace: "ns", Name: "mapped"}, Addr: netip.MustParseAddr("10.0.0.1"), ContainerID: "c1"}},
		{"ns/a", "10.0.0.1 ", ipam.Allocation{}},    // a space, no container ID
		{"ns/a", " c1", ipam.Allocation{}},          // no address
		{"ns/a", "10.0.0.1\tc1", ipam.Allocation{}}, // only a space separates
		{"ns/a", "fe80::1%eth0 c1", ipam.Allocation{}},
		{"ns/a", "10.0.0.1/24 c1", ipam.Allocation{}},
	}
	for _, tc := range cases {
		t.Run(tc.key+"="+tc.value, func(t *testing.T) {
			got, err := Parse(tc.key, []byte(tc.value))
			if tc.want == (ipam.Allocation{}) {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestKey(t *testing.T) {
	k, err := Key(kubemodel.PodID{Namespace: "default", Name: "web-0"})
	require.NoError(t, err)
	assert.Equal(t, "default/web-0", k)
	for _, bad := range []kubemodel.PodID{{Namespace: "x"}, {Namespace: "a/b", Name: "c"}, {Namespace: "a", Name: "b/c"}} {
		_, err := Key(bad)
		require.Error(t, err, "%+v", bad)
	}
	assert.Equal(t, "x=fd00::1", string(AppendValue([]byte("x="), netip.MustParseAddr("fd00::1"), "")))
	assert.Equal(t, "10.1.5.2 3f2a9c0e51d4", string(AppendValue(nil, netip.MustParseAddr("10.1.5.2"), "3f2a9c0e51d4")))
}

// The values written before holders were recorded (the address only)
// are read with an unknown holder, and re-encode to the same bytes.
func TestOldRecordsReadable(t *testing.T) {
	for _, v := range []string{"10.1.5.2", "fd00::2", "10.255.255.254", "fd00:1::5:0:0:2"} {
		a, err := Parse("ns/p", []byte(v))
		require.NoError(t, err, v)
		assert.Empty(t, a.ContainerID, v)
		assert.Equal(t, v, string(AppendValue(nil, a.Addr, a.ContainerID)))
	}
}

// FuzzParse checks that Parse and Key are inverse and that a parsed record
// re-encodes to one that parses to the same allocation.
func FuzzParse(f *testing.F) {
	f.Add("default/web-0", []byte("10.1.5.2"))
	f.Add("/x", []byte("fd00::1"))
	f.Add("a/b/c", []byte("1.2.3.4"))
	f.Add("ns/n", []byte("::ffff:1.2.3.4"))
	f.Add("ns/n", []byte("fe80::1%eth0"))
	f.Add("ns/n", []byte("10.1.5.2 3f2a9c0e51d4"))
	f.Add("ns/n", []byte("::ffff:1.2.3.4 c"))
	f.Add("ns/n", []byte("10.1.5.2 "))
	f.Fuzz(func(t *testing.T, key string, value []byte) {
		a, err := Parse(key, value)
		if err != nil {
			return
		}
		k, err := Key(a.Pod)
		if err != nil {
			t.Fatalf("Parse(%q) gave pod %+v, which Key rejects: %v", key, a.Pod, err)
		}
		if k != key {
			t.Fatalf("Key(Parse(%q)) = %q", key, k)
		}
		v := AppendValue(nil, a.Addr, a.ContainerID)
		again, err := Parse(k, v)
		if err != nil || again != a {
			t.Fatalf("round trip of %+v: %+v, %v", a, again, err)
		}
		// A value whose address is in canonical text form (not, e.g.,
		// IPv4-mapped or with leading zeros in IPv6 groups) re-encodes to
		// the same bytes: the container ID is kept verbatim.
		addrText, _, _ := bytes.Cut(value, []byte{' '})
		if string(addrText) == a.Addr.String() && !bytes.Equal(v, value) {
			t.Fatalf("value %q re-encoded as %q", value, v)
		}
	})
}

// FuzzValue checks that every value AppendValue returns parses back to the
// same address and container ID, whatever the container ID holds.
func FuzzValue(f *testing.F) {
	f.Add([]byte{10, 1, 5, 2}, "3f2a9c0e51d4")
	f.Add([]byte{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2}, "")
	f.Add([]byte{10, 0, 0, 1}, " leading and trailing ")
	f.Add([]byte{10, 0, 0, 1}, "line\nbreak\x00nul\xff")
	f.Fuzz(func(t *testing.T, ip []byte, container string) {
		addr, ok := netip.AddrFromSlice(ip)
		if !ok {
			return
		}
		addr = addr.Unmap()
		a, err := Parse("ns/p", AppendValue(nil, addr, container))
		if err != nil {
			t.Fatalf("Parse(AppendValue(%s, %q)): %v", addr, container, err)
		}
		want := ipam.Allocation{Pod: kubemodel.PodID{Namespace: "ns", Name: "p"}, Addr: addr, ContainerID: container}
		if a != want {
			t.Fatalf("Parse(AppendValue(%s, %q)) = %+v", addr, container, a)
		}
	})
}

// FuzzKey checks that every key Key returns parses back to its pod.
func FuzzKey(f *testing.F) {
	f.Add("default", "web-0")
	f.Add("", "x")
	f.Add("a/b", "c")
	f.Fuzz(func(t *testing.T, ns, name string) {
		pod := kubemodel.PodID{Namespace: ns, Name: name}
		k, err := Key(pod)
		if err != nil {
			return
		}
		a, err := Parse(k, []byte("10.0.0.1"))
		if err != nil || a.Pod != pod {
			t.Fatalf("Parse(Key(%+v)) = %+v, %v", pod, a, err)
		}
	})
}
