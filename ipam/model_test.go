package ipam_test

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vswitchkit/vswitchkit/internal/testseed"
	"github.com/vswitchkit/vswitchkit/ipam"
)

// oracle is a naive reference allocator: a map and a linear scan.
type oracle struct {
	addrs  []netip.Addr // allocatable addresses in order
	cursor int          // index of the last allocated address
	owner  map[netip.Addr]podID
	byPod  map[podID]netip.Addr
}

func newOracle(subnet netip.Prefix) *oracle {
	o := &oracle{owner: map[netip.Addr]podID{}, byPod: map[podID]netip.Addr{}}
	last := subnet.Addr()
	for a := subnet.Addr(); subnet.Contains(a); a = a.Next() {
		last = a
	}
	for a := subnet.Addr().Next().Next(); a != last; a = a.Next() {
		o.addrs = append(o.addrs, a)
	}
	o.cursor = len(o.addrs) - 1
	return o
}

func (o *oracle) alloc(p podID) (netip.Addr, bool) {
	if a, ok := o.byPod[p]; ok {
		return a, true
	}
	for k := 1; k <= len(o.addrs); k++ {
		idx := (o.cursor + k) % len(o.addrs)
		a := o.addrs[idx]
		if _, used := o.owner[a]; !used {
			o.owner[a], o.byPod[p], o.cursor = p, a, idx
			return a, true
		}
	}
	return netip.Addr{}, false
}

func (o *oracle) release(p podID) {
	if a, ok := o.byPod[p]; ok {
		delete(o.owner, a)
		delete(o.byPod, p)
	}
}

func (o *oracle) allocations() []ipam.Allocation {
	out := []ipam.Allocation{}
	for a, p := range o.owner {
		out = append(out, ipam.Allocation{Pod: p, Addr: a})
	}
	slices.SortFunc(out, func(x, y ipam.Allocation) int { return x.Addr.Compare(y.Addr) })
	return out
}

func TestAllocatorModel(t *testing.T) {
	cases := []struct {
		name string
		cfg  ipam.Config
		id   uint32
		pods int
	}{
		{"ipv4 /27", ipam.Config{PodSubnetCIDR: pfx("10.0.0.0/16"), PodSubnetOneNodePrefixLen: 27}, 9, 40},
		{"ipv4 /24", ipam.Config{}, 5, 300},
		{"ipv6 /120", ipam.Config{PodSubnetCIDR: pfx("fe10:f00d::/90"), PodSubnetOneNodePrefixLen: 120}, 5, 300},
		{"ipv6 /116 spanning chunk-sized ranges", ipam.Config{PodSubnetCIDR: pfx("fd00::/100"), PodSubnetOneNodePrefixLen: 116}, 3, 5000},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			seed := testseed.Seeds(t, uint64(tc.id))[0]
			testseed.Log(t, seed)
			i := newReady(t, tc.id, tc.cfg)
			subnet := i.PodSubnetThisNodePrefix()
			o := newOracle(subnet)
			rng := rand.New(rand.NewPCG(seed, uint64(tc.pods)))
			steps := 6000
			if tc.pods > 1000 {
				steps = 12000
			}
			for step := range steps {
				p := pod(fmt.Sprint("p", rng.IntN(tc.pods)))
				switch r := rng.IntN(100); {
				case r < 60:
					want, ok := o.alloc(p)
					got, err := i.AllocatePodAddr(p)
					if !ok {
						require.ErrorIs(t, err, ipam.ErrPoolExhausted, "step %d", step)
						continue
					}
					require.NoError(t, err, "step %d", step)
					require.Equal(t, want, got, "step %d alloc %s", step, p)
				case r < 98:
					o.release(p)
					require.NoError(t, i.ReleasePodIP(p))
				default:
					// A run-time resync with an empty Kubernetes state keeps
					// everything (and the cursor).
					resync(t, i, kubeState(nil))
				}
				if step%97 == 0 {
					require.Equal(t, o.allocations(), i.Allocations(), "step %d", step)
				}
			}
			require.Equal(t, o.allocations(), i.Allocations())
		})
	}
}
