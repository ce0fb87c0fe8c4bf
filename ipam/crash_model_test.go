package ipam_test

import (
	"cmp"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/controllertest"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/ipam"
	"github.com/vswitchkit/vswitchkit/ipam/ipamtest"
)

// TestCrashRecoveryModel drives IPAM through random AddPod/DeletePod
// events, a Kubernetes state that reflects them late, run-time resyncs and
// crashes (a new IPAM on the same Store), and checks that a running pod
// always keeps its address and that no address is ever handed to two
// running pods. At the end, with everything reflected, exactly the running
// pods hold addresses (nothing leaked).
func TestCrashRecoveryModel(t *testing.T) {
	for _, withStore := range []bool{true, false} {
		for seed := range uint64(4) {
			t.Run(fmt.Sprintf("store=%v/seed%d", withStore, seed), func(t *testing.T) {
				crashModel(t, seed, withStore)
			})
		}
	}
}

// crashModel runs one model sequence. Without a Store crashes are not
// survivable by design (see the package doc), so only run-time resyncs run.
func crashModel(t *testing.T, seed uint64, withStore bool) {
	rng := rand.New(rand.NewPCG(seed, 42))
	store := &ipamtest.MemStore{}
	// A /27 per node: 29 addresses, so wrap-around happens often.
	cfg := ipam.Config{PodSubnetCIDR: pfx("10.1.0.0/16"), PodSubnetOneNodePrefixLen: 27}
	if withStore {
		cfg.Store = store
	}
	newIPAM := func() *ipam.IPAM { return must(ipam.New(ipamtest.NewNodeID(3), cfg)) }
	i := newIPAM()

	live := map[podID]netip.Addr{}     // running pods (ground truth)
	kube := map[podID]*kubemodel.Pod{} // the (lagging) Kubernetes state
	unreflected := map[podID]bool{}    // running, not yet in kube with its address
	deleting := map[podID]bool{}       // deleted, kube object not yet removed
	state := func() controller.KubeStateData { return kubeState(slices.Collect(maps.Values(kube))) }
	resyncWith := func(x *ipam.IPAM) {
		require.NoError(t, x.Resync(controller.NewDBResync(), state(), 1, controllertest.NewTxn()))
	}
	resyncWith(i)
	next := 0

	adds := 0
	for step := range 3000 {
		switch op := rng.IntN(100); {
		case op < 35: // AddPod of a new pod (names are reused)
			p := pod(fmt.Sprint("p", next%40))
			next++
			if _, running := live[p]; running || deleting[p] {
				continue
			}
			a, err := i.Update(controller.NewAddPodEvent(p, "c", "ns"), controllertest.NewTxn())
			if err != nil {
				require.ErrorIs(t, err, ipam.ErrPoolExhausted, "step %d: %s", step, a)
				continue
			}
			addr, ok := i.PodAddr(p)
			require.True(t, ok)
			for q, b := range live {
				require.NotEqual(t, b, addr, "step %d: %s handed out to %s while %s runs with it", step, addr, p, q)
			}
			live[p] = addr
			unreflected[p] = true
			adds++
		case op < 60: // DeletePod (CNI DEL); the pod turns terminating
			if len(live) == 0 {
				continue
			}
			pods := slices.SortedFunc(maps.Keys(live), func(a, b podID) int { return cmp.Compare(a.String(), b.String()) })
			p := pods[rng.IntN(len(pods))]
			_, err := i.Update(controller.NewDeletePodEvent(p, "c"), controllertest.NewTxn())
			require.NoError(t, err)
			delete(live, p)
			delete(unreflected, p)
			if k, ok := kube[p]; ok {
				term := &kubemodel.Pod{Namespace: k.Namespace, Name: k.Name, IpAddress: k.IpAddress, Terminating: true}
				kube[p] = term
				deleting[p] = true
			}
		case op < 65: // sandbox re-created: DEL + ADD of a running pod, its kube object stays
			if len(live) == 0 {
				continue
			}
			pods := slices.SortedFunc(maps.Keys(live), func(a, b podID) int { return cmp.Compare(a.String(), b.String()) })
			p := pods[rng.IntN(len(pods))]
			_, err := i.Update(controller.NewDeletePodEvent(p, "c"), controllertest.NewTxn())
			require.NoError(t, err)
			delete(live, p)
			if _, err := i.Update(controller.NewAddPodEvent(p, "c2", "ns"), controllertest.NewTxn()); err != nil {
				require.ErrorIs(t, err, ipam.ErrPoolExhausted)
				delete(unreflected, p)
				if k, ok := kube[p]; ok {
					kube[p] = &kubemodel.Pod{Namespace: k.Namespace, Name: k.Name, IpAddress: k.IpAddress, Terminating: true}
					deleting[p] = true
				}
				continue
			}
			addr, _ := i.PodAddr(p)
			for q, b := range live {
				require.NotEqual(t, b, addr, "step %d: %s handed out to %s while %s runs with it", step, addr, p, q)
			}
			live[p] = addr
			unreflected[p] = true
		case op < 75: // the reflector catches up with one running pod
			for p := range unreflected {
				kube[p] = kpod(p.Name, live[p].String())
				delete(unreflected, p)
				break
			}
		case op < 85: // the reflector removes one deleted pod
			for p := range deleting {
				prev := kube[p]
				delete(kube, p)
				delete(deleting, p)
				ev := &controller.KubeStateChange{Resource: kubemodel.PodResource, Key: kubemodel.PodKey(p.Namespace, p.Name), PrevValue: prev}
				require.True(t, i.HandlesEvent(ev))
				_, err := i.Update(ev, controllertest.NewTxn())
				require.NoError(t, err)
				break
			}
		case op < 92: // run-time (healing) resync
			resyncWith(i)
		default: // crash and restart on the same store
			if withStore {
				i = newIPAM()
			}
			resyncWith(i)
		}
		for p, a := range live {
			got, ok := i.PodAddr(p)
			require.True(t, ok, "step %d: running pod %s lost its address %s", step, p, a)
			require.Equal(t, a, got, "step %d: running pod %s changed address", step, p)
		}
	}
	require.Greater(t, adds, 500)
	// Let the reflector catch up completely; nothing may be left over.
	for p := range deleting {
		prev := kube[p]
		delete(kube, p)
		_, err := i.Update(&controller.KubeStateChange{Resource: kubemodel.PodResource, Key: kubemodel.PodKey(p.Namespace, p.Name), PrevValue: prev}, controllertest.NewTxn())
		require.NoError(t, err)
	}
	want := []ipam.Allocation{}
	for p, a := range live {
		want = append(want, ipam.Allocation{Pod: p, Addr: a})
	}
	slices.SortFunc(want, func(x, y ipam.Allocation) int { return x.Addr.Compare(y.Addr) })
	require.Equal(t, want, i.Allocations())
	if withStore {
		require.Equal(t, want, append([]ipam.Allocation{}, store.Records()...))
	}
}
