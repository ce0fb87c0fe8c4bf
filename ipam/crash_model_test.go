package ipam_test

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/controllertest"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/internal/testseed"
	"github.com/vswitchkit/vswitchkit/ipam"
	"github.com/vswitchkit/vswitchkit/ipam/ipamtest"
)

// TestCrashRecoveryModel drives IPAM through random AddPod/DeletePod
// events, a Kubernetes state that reflects them late, run-time resyncs and
// crashes (a new IPAM on the same Store), and checks that a running pod
// always keeps its address and that no address is ever handed to two
// running pods. Every sandbox has its own container ID; kubelet re-creates
// sandboxes both ways: DEL of the old one, then ADD of the new one, and
// ADD of the new one first, with the old one's DEL (or CNI GC) arriving
// any time later — after crashes, after the pod was deleted and a pod of
// the same name started. With faults, every Store call may fail before it is
// applied or after (applied, error returned); failed CNI ADDs and DELs are
// retried or abandoned as kubelet does. At the end, with everything
// reflected and retried, exactly the running pods hold addresses and the
// Store holds exactly their records (nothing leaked).
func TestCrashRecoveryModel(t *testing.T) {
	for _, mode := range []string{"store", "store+faults", "no-store"} {
		for _, seed := range testseed.Seeds(t, 0, 1, 2, 3) {
			t.Run(fmt.Sprintf("%s/seed%d", mode, seed), func(t *testing.T) {
				testseed.Log(t, seed)
				crashModel(t, seed, mode)
			})
		}
	}
}

// crashModel runs one model sequence. Without a Store crashes are not
// survivable by design (see the package doc), so only run-time resyncs run.
func crashModel(t *testing.T, seed uint64, mode string) {
	rng := rand.New(rand.NewPCG(seed, 42))
	frng := rand.New(rand.NewPCG(seed, 7))
	faulty := false // inject faults into the current step
	fault := func() ipamtest.Fault {
		if !faulty || mode != "store+faults" {
			return ipamtest.NoFault
		}
		switch r := frng.IntN(100); {
		case r < 8:
			return ipamtest.FailBefore
		case r < 16:
			return ipamtest.FailAfter
		}
		return ipamtest.NoFault
	}
	store := &ipamtest.MemStore{}
	fs := &ipamtest.FaultStore{
		Store:  store,
		Put:    func(int, ipam.Allocation) ipamtest.Fault { return fault() },
		Delete: func(int, podID) ipamtest.Fault { return fault() },
		List:   func(int) ipamtest.Fault { return fault() },
	}
	// A /27 per node: 29 addresses, so wrap-around happens often.
	cfg := ipam.Config{PodSubnetCIDR: pfx("10.1.0.0/16"), PodSubnetOneNodePrefixLen: 27}
	withStore := mode != "no-store"
	if withStore {
		cfg.Store = fs
	}
	newIPAM := func() *ipam.IPAM { return must(ipam.New(ipamtest.NewNodeID(3), cfg)) }
	i := newIPAM()

	live := map[podID]netip.Addr{}     // running pods (ground truth)
	sandbox := map[podID]string{}      // container ID of each running pod's sandbox
	kube := map[podID]*kubemodel.Pod{} // the (lagging) Kubernetes state
	unreflected := map[podID]bool{}    // running, not yet in kube with its address
	deleting := map[podID]bool{}       // deleted, kube object not yet removed
	failedAdd := map[podID]string{}    // CNI ADD of this sandbox failed; kubelet retries it or deletes the pod
	failedDel := map[podID]string{}    // CNI DEL of this sandbox failed; kubelet retries it
	type staleDel struct {
		pod       podID
		container string
	}
	var stale []staleDel // DELs of re-created sandboxes, not delivered yet
	containers := 0
	newContainer := func() string { containers++; return fmt.Sprint("c", containers) }
	state := func() controller.KubeStateData { return kubeState(slices.Collect(maps.Values(kube))) }
	byName := func(a, b podID) int { return cmp.Compare(a.String(), b.String()) }
	sorted := func(m map[podID]bool) []podID { return slices.SortedFunc(maps.Keys(m), byName) }
	sortedC := func(m map[podID]string) []podID { return slices.SortedFunc(maps.Keys(m), byName) }
	sortedLive := func() []podID {
		return slices.SortedFunc(maps.Keys(live), byName)
	}
	injected := func(err error) bool { return errors.Is(err, ipamtest.ErrInjected) }
	// resyncWith resyncs; a failed resync is retried as the loop's
	// healing resync would do.
	resyncWith := func(x *ipam.IPAM) {
		for {
			err := x.Resync(controller.NewDBResync(), state(), 1, controllertest.NewTxn())
			if err == nil || !injected(err) {
				require.NoError(t, err)
				return
			}
		}
	}
	started := func(step int, p podID, addr netip.Addr) {
		for q, b := range live {
			require.NotEqual(t, b, addr, "step %d: %s handed out to %s while %s runs with it", step, addr, p, q)
		}
		live[p] = addr
		unreflected[p] = true
	}
	// deleted: CNI DEL of p succeeded; its kube object turns terminating.
	deleted := func(p podID) {
		if k, ok := kube[p]; ok {
			kube[p] = &kubemodel.Pod{Namespace: k.Namespace, Name: k.Name, IpAddress: k.IpAddress, Terminating: true}
			deleting[p] = true
		}
	}
	// del: CNI DEL of sandbox c of pod p.
	del := func(p podID, c string) {
		delete(live, p)
		delete(sandbox, p)
		delete(unreflected, p)
		delete(failedAdd, p)
		_, err := i.Update(controller.NewDeletePodEvent(p, c), controllertest.NewTxn())
		if err != nil {
			require.True(t, injected(err), "%v", err)
			failedDel[p] = c
			return
		}
		delete(failedDel, p)
		deleted(p)
	}
	add := func(step int, p podID, c string) {
		_, err := i.Update(controller.NewAddPodEvent(p, c, "ns"), controllertest.NewTxn())
		switch {
		case errors.Is(err, ipam.ErrPoolExhausted):
			delete(failedAdd, p)
			deleted(p)
		case err != nil:
			require.True(t, injected(err), "step %d: %v", step, err)
			failedAdd[p] = c
		default:
			delete(failedAdd, p)
			addr, ok := i.PodAddr(p)
			require.True(t, ok)
			started(step, p, addr)
			sandbox[p] = c
		}
	}
	// delStale delivers the DEL of a re-created sandbox; it must not
	// touch the pod's current sandbox. A failed one is retried later.
	keptLive := 0 // stale DELs that found the pod running in its new sandbox
	delStale := func(k int) {
		d := stale[k]
		desc, err := i.Update(controller.NewDeletePodEvent(d.pod, d.container), controllertest.NewTxn())
		if err != nil {
			require.True(t, injected(err), "%v", err)
			return
		}
		if _, running := live[d.pod]; running {
			require.True(t, strings.HasPrefix(desc, "kept "), "stale DEL of %s %s: %q", d.pod, d.container, desc)
			keptLive++
		}
		stale = slices.Delete(stale, k, k+1)
	}

	resyncWith(i)
	next := 0
	adds := 0
	for step := range 3000 {
		faulty = true
		switch op := rng.IntN(100); {
		case op < 35: // AddPod of a new pod (names are reused)
			p := pod(fmt.Sprint("p", next%40))
			next++
			_, fa := failedAdd[p]
			_, fd := failedDel[p]
			if _, running := live[p]; running || deleting[p] || fa || fd {
				continue
			}
			add(step, p, newContainer())
			if _, ok := live[p]; ok {
				adds++
			}
		case op < 40: // kubelet retries a failed ADD, or gives up and deletes the pod
			if ps := sortedC(failedAdd); len(ps) > 0 {
				p := ps[rng.IntN(len(ps))]
				if rng.IntN(2) == 0 {
					add(step, p, failedAdd[p])
				} else {
					del(p, failedAdd[p])
				}
			}
		case op < 43: // kubelet retries a failed DEL
			if ps := sortedC(failedDel); len(ps) > 0 {
				p := ps[rng.IntN(len(ps))]
				del(p, failedDel[p])
			}
		case op < 60: // DeletePod (CNI DEL); the pod turns terminating
			if len(live) == 0 {
				continue
			}
			pods := sortedLive()
			p := pods[rng.IntN(len(pods))]
			del(p, sandbox[p])
		case op < 65: // sandbox re-created, its kube object stays
			if len(live) == 0 {
				continue
			}
			pods := sortedLive()
			p := pods[rng.IntN(len(pods))]
			old := sandbox[p]
			if rng.IntN(2) == 0 {
				// DEL of the old sandbox, then ADD of the new one.
				delete(live, p)
				delete(sandbox, p)
				delete(unreflected, p)
				if _, err := i.Update(controller.NewDeletePodEvent(p, old), controllertest.NewTxn()); err != nil {
					require.True(t, injected(err), "%v", err)
					failedDel[p] = old
					continue
				}
				add(step, p, newContainer())
				continue
			}
			// ADD of the new sandbox first: the pod keeps its address (the
			// invariant below checks it); the old sandbox's DEL comes later.
			stale = append(stale, staleDel{p, old})
			c := newContainer()
			if _, err := i.Update(controller.NewAddPodEvent(p, c, "ns"), controllertest.NewTxn()); err != nil {
				// The new sandbox failed: the pod does not run until
				// kubelet retries the ADD or deletes the pod.
				require.True(t, injected(err), "step %d: %v", step, err)
				delete(live, p)
				delete(sandbox, p)
				delete(unreflected, p)
				failedAdd[p] = c
				continue
			}
			sandbox[p] = c
		case op < 68: // a DEL (or CNI GC) of a re-created sandbox arrives
			if len(stale) > 0 {
				delStale(rng.IntN(len(stale)))
			}
		case op < 75: // the reflector catches up with one running pod
			if ps := sorted(unreflected); len(ps) > 0 {
				p := ps[rng.IntN(len(ps))]
				kube[p] = kpod(p.Name, live[p].String())
				delete(unreflected, p)
			}
		case op < 85: // the reflector removes one deleted pod
			faulty = false // a failed release here would only leak (see the report), never duplicate
			if ps := sorted(deleting); len(ps) > 0 {
				p := ps[rng.IntN(len(ps))]
				prev := kube[p]
				delete(kube, p)
				delete(deleting, p)
				ev := &controller.KubeStateChange{Resource: kubemodel.PodResource, Key: kubemodel.PodKey(p.Namespace, p.Name), PrevValue: prev}
				require.True(t, i.HandlesEvent(ev))
				_, err := i.Update(ev, controllertest.NewTxn())
				require.NoError(t, err)
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
		for _, a := range i.Allocations() {
			if _, running := live[a.Pod]; running {
				require.Equal(t, sandbox[a.Pod], a.ContainerID, "step %d: holder of running pod %s", step, a.Pod)
			}
		}
	}
	if mode == "store+faults" {
		require.Greater(t, keptLive, 8, "stale DELs of running pods")
		require.Greater(t, adds, 250)
		require.Greater(t, fs.Injected(), 100)
	} else {
		require.Greater(t, keptLive, 40, "stale DELs of running pods")
		require.Greater(t, adds, 400)
	}
	// kubelet finally deletes the pods whose ADD failed and retries every
	// failed DEL; the reflector catches up completely; nothing may be left
	// over.
	faulty = false
	for _, p := range sortedC(failedAdd) {
		del(p, failedAdd[p])
	}
	for _, p := range sortedC(failedDel) {
		del(p, failedDel[p])
	}
	for len(stale) > 0 {
		delStale(0)
	}
	for p := range deleting {
		prev := kube[p]
		delete(kube, p)
		_, err := i.Update(&controller.KubeStateChange{Resource: kubemodel.PodResource, Key: kubemodel.PodKey(p.Namespace, p.Name), PrevValue: prev}, controllertest.NewTxn())
		require.NoError(t, err)
	}
	want := []ipam.Allocation{}
	for p, a := range live {
		want = append(want, ipam.Allocation{Pod: p, Addr: a, ContainerID: sandbox[p]})
	}
	slices.SortFunc(want, func(x, y ipam.Allocation) int { return x.Addr.Compare(y.Addr) })
	require.Equal(t, want, i.Allocations())
	if withStore {
		resyncWith(i) // settles the records of failed writes
		require.Equal(t, want, i.Allocations())
		require.Equal(t, want, append([]ipam.Allocation{}, store.Records()...))
	}
}
