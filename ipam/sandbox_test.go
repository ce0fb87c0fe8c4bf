package ipam_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/controllertest"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/ipam"
	"github.com/vswitchkit/vswitchkit/ipam/ipamtest"
)

// update runs one event through the IPAM handler and returns its change
// description.
func update(t *testing.T, i *ipam.IPAM, ev controller.Event) string {
	t.Helper()
	require.True(t, i.HandlesEvent(ev))
	desc, err := i.Update(ev, controllertest.NewTxn())
	require.NoError(t, err)
	return desc
}

// TestSandboxRecreated replays what kubelet does when it re-creates a
// pod's sandbox: CNI ADD of the new sandbox (c2) arrives before CNI DEL
// (or CNI GC) of the old one (c1). IPAM hands the pod its address again
// and must then ignore the old sandbox's DEL: releasing would hand the
// address of the running pod to the next pod. With a Store the holder
// survives a restart between the ADD and the stale DEL.
func TestSandboxRecreated(t *testing.T) {
	for _, tc := range []struct {
		name    string
		store   bool
		restart bool // restart (a new IPAM over the same Store) before the stale DEL
	}{
		{name: "no store"},
		{name: "store", store: true},
		{name: "store, restart before the stale DEL", store: true, restart: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := &ipamtest.MemStore{}
			cfg := ipam.Config{}
			if tc.store {
				cfg.Store = store
			}
			i := newReady(t, 5, cfg)
			web := pod("web")
			update(t, i, controller.NewAddPodEvent(web, "c1", "/proc/1/ns/net"))
			addr, ok := i.PodAddr(web)
			require.True(t, ok)
			require.Equal(t, "10.1.5.2", addr.String())

			// The new sandbox gets the pod's address.
			update(t, i, controller.NewAddPodEvent(web, "c2", "/proc/2/ns/net"))
			got, ok := i.PodAddr(web)
			require.True(t, ok)
			require.Equal(t, addr, got, "the new sandbox keeps the pod's address")

			if tc.restart {
				i = must(ipam.New(ipamtest.NewNodeID(5), cfg))
				resync(t, i, kubeState([]*kubemodel.Pod{kpod("web", "10.1.5.2")}))
			}

			// The old sandbox's DEL must not release it.
			update(t, i, controller.NewDeletePodEvent(web, "c1"))
			got, ok = i.PodAddr(web)
			require.True(t, ok, "the stale DEL of sandbox c1 released the address of the running sandbox c2")
			require.Equal(t, addr, got)
			if tc.store {
				assert.Len(t, store.Records(), 1, "the pod's record survives the stale DEL")
			}
			other, err := i.AllocatePodAddr(pod("next"))
			require.NoError(t, err)
			require.NotEqual(t, addr, other, "duplicate pod IP: the next pod got the address of the running pod")

			// The DEL of the sandbox that holds the address releases it.
			update(t, i, controller.NewDeletePodEvent(web, "c2"))
			_, ok = i.PodAddr(web)
			assert.False(t, ok, "DEL of the holding sandbox releases")
			if tc.store {
				assert.Len(t, store.Records(), 1, "only the record of pod next is left")
			}
		})
	}
}

// TestDeletePodSandboxRules: which DeletePod releases a pod's address,
// depending on the sandbox that holds it.
func TestDeletePodSandboxRules(t *testing.T) {
	const kept = "kept 10.1.5.2 of pod default/web: held by sandbox c1, not by c2"
	const released = "released 10.1.5.2 of pod default/web"
	for _, tc := range []struct {
		name      string
		holder    string // "": allocated through the direct API; "kube": recovered from the Kubernetes state
		container string // of the DeletePod
		want      string
	}{
		{name: "holder's DEL", holder: "c1", container: "c1", want: released},
		{name: "DEL without container ID", holder: "c1", container: "", want: released},
		{name: "DEL of a replaced sandbox", holder: "c1", container: "c2", want: kept},
		{name: "unknown holder (direct API)", holder: "", container: "c2", want: released},
		{name: "unknown holder (Kubernetes state)", holder: "kube", container: "c2", want: released},
	} {
		for _, withStore := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/store=%v", tc.name, withStore), func(t *testing.T) {
				store := &ipamtest.MemStore{}
				cfg := ipam.Config{}
				if withStore {
					cfg.Store = store
				}
				i := must(ipam.New(ipamtest.NewNodeID(5), cfg))
				web := pod("web")
				switch tc.holder {
				case "kube":
					resync(t, i, kubeState([]*kubemodel.Pod{kpod("web", "10.1.5.2")}))
				case "":
					resync(t, i, kubeState(nil))
					_, err := i.AllocatePodAddr(web)
					require.NoError(t, err)
				default:
					resync(t, i, kubeState(nil))
					update(t, i, controller.NewAddPodEvent(web, tc.holder, "/proc/1/ns/net"))
				}
				holder := tc.holder
				if holder == "kube" {
					holder = ""
				}
				require.Equal(t, []ipam.Allocation{{Pod: web, Addr: addr("10.1.5.2"), ContainerID: holder}}, i.Allocations())

				assert.Equal(t, tc.want, update(t, i, controller.NewDeletePodEvent(web, tc.container)))
				if tc.want == kept {
					assert.Equal(t, []ipam.Allocation{{Pod: web, Addr: addr("10.1.5.2"), ContainerID: holder}}, i.Allocations())
					if withStore {
						assert.Equal(t, i.Allocations(), store.Records())
					}
					return
				}
				assert.Empty(t, i.Allocations())
				assert.Empty(t, store.Records())
			})
		}
	}
}

func addr(s string) netip.Addr { return netip.MustParseAddr(s) }

// TestAddPodMovesHolder: an AddPod of a pod that holds an address keeps
// the address and moves it to its sandbox (persisted); Revert gives it
// back; AddPods and direct calls without a container ID keep the holder.
func TestAddPodMovesHolder(t *testing.T) {
	store := &ipamtest.MemStore{}
	i := newReady(t, 5, ipam.Config{Store: store})
	web := pod("web")
	held := func(container string) {
		t.Helper()
		want := []ipam.Allocation{{Pod: web, Addr: addr("10.1.5.2"), ContainerID: container}}
		require.Equal(t, want, i.Allocations())
		require.Equal(t, want, store.Records(), "the record carries the holder")
	}

	assert.Equal(t, "allocated 10.1.5.2 for pod default/web", update(t, i, controller.NewAddPodEvent(web, "c1", "ns1")))
	held("c1")
	assert.Equal(t, "pod default/web already has 10.1.5.2", update(t, i, controller.NewAddPodEvent(web, "c1", "ns1")))
	assert.Equal(t, "pod default/web already has 10.1.5.2", update(t, i, controller.NewAddPodEvent(web, "", "ns1")))
	_, err := i.AllocatePodIP(web, "", "")
	require.NoError(t, err)
	held("c1")
	puts, _ := store.Counts()
	assert.Equal(t, 1, puts, "nothing rewritten")

	// A re-created sandbox takes the address over; Revert gives it back.
	move := controller.NewAddPodEvent(web, "c2", "ns2")
	assert.Equal(t, "pod default/web keeps 10.1.5.2, now held by sandbox c2 (was c1)", update(t, i, move))
	held("c2")
	require.NoError(t, i.Revert(move))
	held("c1")
	require.NoError(t, i.Revert(move), "a second Revert does nothing")
	held("c1")

	// From an unknown holder, and back.
	require.NoError(t, i.ReleasePodIP(web))
	_, err = i.AllocatePodIP(web, "static", "10.1.5.2") // the same address again
	require.NoError(t, err)
	held("")
	move = controller.NewAddPodEvent(web, "c3", "ns3")
	assert.Equal(t, "pod default/web keeps 10.1.5.2, now held by sandbox c3 (was unknown)", update(t, i, move))
	held("c3")
	require.NoError(t, i.Revert(move))
	held("")

	// Revert after the address was released since: nothing to give back.
	move = controller.NewAddPodEvent(web, "c4", "ns4")
	update(t, i, move)
	require.NoError(t, i.ReleasePodIP(web))
	require.NoError(t, i.Revert(move))
	assert.Empty(t, i.Allocations())
	assert.Empty(t, store.Records())
}

// TestAddPodMoveWriteFails: the write that moves the address to a new
// sandbox fails. The AddPod fails, the address stays the pod's, and the
// old sandbox's DEL does not release it whatever the record says; a
// retried AddPod persists the move. After a crash the record decides.
func TestAddPodMoveWriteFails(t *testing.T) {
	for _, fault := range []ipamtest.Fault{ipamtest.FailBefore, ipamtest.FailAfter} {
		t.Run(fault.String(), func(t *testing.T) {
			mem := &ipamtest.MemStore{}
			fs := &ipamtest.FaultStore{Store: mem, Put: func(_ int, a ipam.Allocation) ipamtest.Fault {
				if a.ContainerID == "c2" {
					return fault
				}
				return ipamtest.NoFault
			}}
			cfg := ipam.Config{Store: fs}
			i := newReady(t, 5, cfg)
			web := pod("web")
			update(t, i, controller.NewAddPodEvent(web, "c1", "ns1"))
			_, err := i.Update(controller.NewAddPodEvent(web, "c2", "ns2"), controllertest.NewTxn())
			require.ErrorIs(t, err, ipamtest.ErrInjected)
			assert.Equal(t, "10.1.5.2", podIP(i, "web"))
			wantRec := "c1"
			if fault == ipamtest.FailAfter {
				wantRec = "c2"
			}
			require.Equal(t, []ipam.Allocation{{Pod: web, Addr: addr("10.1.5.2"), ContainerID: wantRec}}, mem.Records())

			// After a crash the record decides who holds the address.
			restarted := must(ipam.New(ipamtest.NewNodeID(5), ipam.Config{Store: mem}))
			resync(t, restarted, kubeState(nil))
			assert.Equal(t, []ipam.Allocation{{Pod: web, Addr: addr("10.1.5.2"), ContainerID: wantRec}}, restarted.Allocations())

			// Without a crash: the old sandbox's DEL keeps it, the retried
			// ADD persists the move (the first success allocates).
			assert.Equal(t, "kept 10.1.5.2 of pod default/web: held by sandbox c2, not by c1",
				update(t, i, controller.NewDeletePodEvent(web, "c1")))
			fs.Put = nil
			assert.Equal(t, "allocated 10.1.5.2 for pod default/web", update(t, i, controller.NewAddPodEvent(web, "c2", "ns2")))
			require.Equal(t, []ipam.Allocation{{Pod: web, Addr: addr("10.1.5.2"), ContainerID: "c2"}}, mem.Records())
			assert.Equal(t, "released 10.1.5.2 of pod default/web", update(t, i, controller.NewDeletePodEvent(web, "c2")))
			assert.Empty(t, mem.Records())
		})
	}
}

// TestResyncKeepsHolders: a Resync takes the holders from memory, then
// from the records (with the record that wins an address), and knows
// none for pods of the Kubernetes state; it rewrites records whose holder
// differs, and leaves records without holder (written before holders were
// recorded) as they are.
func TestResyncKeepsHolders(t *testing.T) {
	store := &ipamtest.MemStore{}
	ctx := t.Context()
	for _, a := range []ipam.Allocation{
		{Pod: pod("old-format"), Addr: addr("10.1.5.10")},
		{Pod: pod("rec"), Addr: addr("10.1.5.11"), ContainerID: "r1"},
		{Pod: pod("dup-b"), Addr: addr("10.1.5.12"), ContainerID: "b1"},
		{Pod: pod("dup-a"), Addr: addr("10.1.5.12"), ContainerID: "a1"},
		{Pod: pod("confirmed-z"), Addr: addr("10.1.5.13"), ContainerID: "z1"},
		{Pod: pod("unconfirmed-a"), Addr: addr("10.1.5.13"), ContainerID: "u1"},
	} {
		require.NoError(t, store.PutAllocation(ctx, a))
	}
	ks := kubeState([]*kubemodel.Pod{kpod("kube", "10.1.5.20"), kpod("confirmed-z", "10.1.5.13"), kpod("rec", "10.1.5.11")})
	i := must(ipam.New(ipamtest.NewNodeID(5), ipam.Config{Store: store}))
	resync(t, i, ks)
	want := []ipam.Allocation{
		{Pod: pod("old-format"), Addr: addr("10.1.5.10")},
		{Pod: pod("rec"), Addr: addr("10.1.5.11"), ContainerID: "r1"},
		{Pod: pod("dup-a"), Addr: addr("10.1.5.12"), ContainerID: "a1"},
		{Pod: pod("confirmed-z"), Addr: addr("10.1.5.13"), ContainerID: "z1"},
		{Pod: pod("kube"), Addr: addr("10.1.5.20")},
	}
	require.Equal(t, want, i.Allocations())
	require.Equal(t, want, store.Records())
	puts, _ := store.Counts()
	assert.Equal(t, 7, puts, "6 records written by the test, 1 by the resync (kube); none rewritten")

	// Memory first: the pod's current sandbox wins over a stale record.
	update(t, i, controller.NewAddPodEvent(pod("rec"), "r2", "ns"))
	require.NoError(t, store.PutAllocation(ctx, ipam.Allocation{Pod: pod("rec"), Addr: addr("10.1.5.11"), ContainerID: "stale"}))
	resync(t, i, ks)
	want[1].ContainerID = "r2"
	require.Equal(t, want, i.Allocations())
	require.Equal(t, want, store.Records(), "the stale holder is rewritten")

	// And after a restart, from the records.
	i = must(ipam.New(ipamtest.NewNodeID(5), ipam.Config{Store: store}))
	resync(t, i, ks)
	require.Equal(t, want, i.Allocations())
	assert.Equal(t, "kept 10.1.5.11 of pod default/rec: held by sandbox r2, not by r1",
		update(t, i, controller.NewDeletePodEvent(pod("rec"), "r1")))
}

// TestDeletePodBeforeRecordsLoaded: with a Store, a DeletePod naming a
// sandbox of a pod whose record is not loaded yet (external IPAM waiting
// for this node's pod CIDR) waits, since the record may name the pod's
// current sandbox; one without a container ID deletes the record as
// before.
func TestDeletePodBeforeRecordsLoaded(t *testing.T) {
	store := &ipamtest.MemStore{}
	require.NoError(t, store.PutAllocation(t.Context(), ipam.Allocation{Pod: pod("web"), Addr: addr("10.244.3.7"), ContainerID: "c2"}))
	cfg := ipam.Config{ExternalIPAM: true, NodeName: "worker-1", EventLoop: &controllertest.EventRecorder{}, PodSubnetCIDR: pfx("10.244.0.0/16"), Store: store}
	i := must(ipam.New(ipamtest.NewNodeID(5), cfg))
	resync(t, i, kubeState(nil)) // no node object: no pod CIDR

	_, err := i.Update(controller.NewDeletePodEvent(pod("web"), "c1"), controllertest.NewTxn())
	require.ErrorIs(t, err, ipam.ErrNotReady)
	assert.Len(t, store.Records(), 1)

	// Once the CIDR is known the record is loaded and the holder decides.
	node := &kubemodel.Node{Name: "worker-1", PodCidrs: []string{"10.244.3.0/24"}}
	resync(t, i, kubeState(nil, node))
	assert.Equal(t, "kept 10.244.3.7 of pod default/web: held by sandbox c2, not by c1",
		update(t, i, controller.NewDeletePodEvent(pod("web"), "c1")))

	// A DeletePod without container ID of an unloaded record deletes it.
	require.NoError(t, store.PutAllocation(t.Context(), ipam.Allocation{Pod: pod("other"), Addr: addr("10.244.3.9"), ContainerID: "c9"}))
	j := must(ipam.New(ipamtest.NewNodeID(5), cfg))
	resync(t, j, kubeState(nil))
	assert.Empty(t, update(t, j, controller.NewDeletePodEvent(pod("other"), "")))
	assert.Equal(t, []ipam.Allocation{{Pod: pod("web"), Addr: addr("10.244.3.7"), ContainerID: "c2"}}, store.Records())
}

// failSandbox is a pod handler whose AddPod fails for one container ID.
type failSandbox struct{ container string }

func (failSandbox) String() string { return "pods" }
func (failSandbox) HandlesEvent(ev controller.Event) bool {
	_, ok := ev.(*controller.AddPod)
	return ok
}
func (failSandbox) Resync(controller.Event, controller.KubeStateData, int, controller.ResyncOperations) error {
	return nil
}
func (f failSandbox) Update(ev controller.Event, _ controller.UpdateOperations) (string, error) {
	if ev.(*controller.AddPod).ContainerID == f.container {
		return "", errors.New("sandbox setup failed")
	}
	return "", nil
}
func (failSandbox) Revert(controller.Event) error { return nil }

// TestSandboxRecreatedThroughLoop runs kubelet's sandbox re-creation
// through a real event loop, with a pod handler after IPAM whose AddPod of
// one sandbox fails: the loop reverts IPAM, which gives the address back
// to the running sandbox, so neither the failed sandbox's DEL nor the
// replaced one's releases it.
func TestSandboxRecreatedThroughLoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &ipamtest.MemStore{}
		i := must(ipam.New(ipamtest.NewNodeID(5), ipam.Config{Store: store}))
		l, err := controller.New([]controller.EventHandler{i, failSandbox{container: "c2"}}, &controllertest.Southbound{}, controller.Config{})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- l.Run(ctx) }()
		defer func() {
			cancel()
			require.ErrorIs(t, <-done, context.Canceled)
		}()
		require.NoError(t, l.PushEvent(controller.NewDBResync()))
		push := func(ev interface {
			controller.Event
			Wait() error
		}) error {
			t.Helper()
			require.NoError(t, l.PushEvent(ev))
			return ev.Wait()
		}
		web := pod("web")
		held := func(container string) {
			t.Helper()
			want := []ipam.Allocation{{Pod: web, Addr: addr("10.1.5.2"), ContainerID: container}}
			require.Equal(t, want, i.Allocations())
			require.Equal(t, want, store.Records())
		}

		require.NoError(t, push(controller.NewAddPodEvent(web, "c1", "ns1")))
		held("c1")
		// Sandbox c2 fails in the pod handler: the loop reverts IPAM.
		require.ErrorContains(t, push(controller.NewAddPodEvent(web, "c2", "ns2")), "sandbox setup failed")
		held("c1")
		require.NoError(t, push(controller.NewDeletePodEvent(web, "c2")))
		held("c1")
		// Sandbox c3 replaces c1; c1's DEL comes late.
		require.NoError(t, push(controller.NewAddPodEvent(web, "c3", "ns3")))
		held("c3")
		require.NoError(t, push(controller.NewDeletePodEvent(web, "c1")))
		held("c3")
		next := controller.NewAddPodEvent(pod("next"), "n1", "nsn")
		require.NoError(t, push(next))
		a, ok := i.PodAddr(pod("next"))
		require.True(t, ok)
		assert.Equal(t, "10.1.5.3", a.String())
		require.NoError(t, push(controller.NewDeletePodEvent(web, "c3")))
		_, ok = i.PodAddr(web)
		assert.False(t, ok)

		var descs []string
		for _, r := range l.History().Last(100) {
			for _, h := range r.Handlers {
				if h.Handler == "ipam" && h.Change != "" {
					descs = append(descs, h.Change)
				}
			}
		}
		assert.Contains(t, descs, "kept 10.1.5.2 of pod default/web: held by sandbox c3, not by c1")
	})
}

// TestRevertMoveWriteFails: the write that gives the address back to the
// previous sandbox on Revert fails: Revert returns the error, IPAM holds
// the address for the previous sandbox, and the next Resync settles the
// record.
func TestRevertMoveWriteFails(t *testing.T) {
	mem := &ipamtest.MemStore{}
	fs := &ipamtest.FaultStore{Store: mem}
	i := newReady(t, 5, ipam.Config{Store: fs})
	web := pod("web")
	update(t, i, controller.NewAddPodEvent(web, "c1", "ns1"))
	move := controller.NewAddPodEvent(web, "c2", "ns2")
	update(t, i, move)
	fs.Put = func(_ int, a ipam.Allocation) ipamtest.Fault {
		if a.ContainerID == "c1" {
			return ipamtest.FailBefore
		}
		return ipamtest.NoFault
	}
	require.ErrorIs(t, i.Revert(move), ipamtest.ErrInjected)
	want := []ipam.Allocation{{Pod: web, Addr: addr("10.1.5.2"), ContainerID: "c1"}}
	assert.Equal(t, want, i.Allocations())
	assert.Equal(t, "c2", mem.Records()[0].ContainerID, "not written yet")
	assert.Equal(t, "kept 10.1.5.2 of pod default/web: held by sandbox c1, not by c2",
		update(t, i, controller.NewDeletePodEvent(web, "c2")))
	fs.Put = nil
	resync(t, i, kubeState(nil))
	assert.Equal(t, want, mem.Records())
}

// FuzzSandboxEvents drives IPAM with AddPod and DeletePod events of a few
// pods and sandboxes, direct API calls, resyncs and restarts (with a
// Store), and checks every step against a naive model of the holder rules:
// an AddPod of a pod with an address keeps it and (with a container ID)
// moves it to its sandbox; a DeletePod releases unless it names a sandbox
// other than the known holder; addresses are unique and stable while
// held; the Store holds exactly the allocations.
func FuzzSandboxEvents(f *testing.F) {
	f.Add(true, []byte{0x20, 0x40, 0x21, 0x22, 0x41, 0x02, 0x21, 0x61})
	f.Add(false, []byte{0x20, 0x40, 0x21, 0x03, 0x24, 0x29, 0x21})
	f.Add(true, []byte{0x04, 0x60, 0x21, 0x02, 0x41, 0x23, 0x01})
	f.Fuzz(runSandboxOps)
}

// runSandboxOps runs one FuzzSandboxEvents input: each byte is one step.

func runSandboxOps(t *testing.T, withStore bool, ops []byte) {
	store := &ipamtest.MemStore{}
	cfg := ipam.Config{}
	if withStore {
		cfg.Store = store
	}
	i := newReady(t, 5, cfg)
	type held struct {
		addr   netip.Addr
		holder string
	}
	model := map[podID]held{}
	check := func(step int) {
		want := []ipam.Allocation{}
		for p, h := range model {
			want = append(want, ipam.Allocation{Pod: p, Addr: h.addr, ContainerID: h.holder})
		}
		slices.SortFunc(want, func(a, b ipam.Allocation) int { return a.Addr.Compare(b.Addr) })
		require.Equal(t, want, append([]ipam.Allocation{}, i.Allocations()...), "step %d", step)
		if withStore {
			require.Equal(t, want, append([]ipam.Allocation{}, store.Records()...), "step %d: records", step)
		}
	}
	got := func(step int, p podID, holder string, moves bool) {
		a, ok := i.PodAddr(p)
		require.True(t, ok, "step %d", step)
		if h, ok := model[p]; ok {
			require.Equal(t, h.addr, a, "step %d: %s changed address", step, p)
			if moves && holder != "" {
				h.holder = holder
			}
			model[p] = h
			return
		}
		for q, h := range model {
			require.NotEqual(t, h.addr, a, "step %d: %s handed to %s too", step, a, q)
		}
		model[p] = held{a, holder}
	}
	for step, b := range ops {
		p := pod(fmt.Sprint("p", b>>3&3))
		c := ""
		if n := b >> 5; n > 0 {
			c = fmt.Sprint("c", n)
		}
		switch b % 6 {
		case 0: // AddPod
			_, err := i.Update(controller.NewAddPodEvent(p, c, "ns"), controllertest.NewTxn())
			require.NoError(t, err)
			got(step, p, c, true)
		case 1: // DeletePod
			_, err := i.Update(controller.NewDeletePodEvent(p, c), controllertest.NewTxn())
			require.NoError(t, err)
			if h, ok := model[p]; ok && (c == "" || h.holder == "" || h.holder == c) {
				delete(model, p)
			}
		case 2: // direct allocation: no holder, keeps the holder
			_, err := i.AllocatePodAddr(p)
			require.NoError(t, err)
			got(step, p, "", false)
		case 3: // direct release: whatever the holder
			require.NoError(t, i.ReleasePodIP(p))
			delete(model, p)
		case 4: // run-time resync with an empty Kubernetes state
			resync(t, i, kubeState(nil))
		case 5: // restart: with a Store everything survives, holders included
			if withStore {
				i = must(ipam.New(ipamtest.NewNodeID(5), cfg))
			}
			resync(t, i, kubeState(nil))
		}
		check(step)
	}
}

// TestLateKubeDeletionKeepsSandboxAddress: a pod re-created under the
// same name (a StatefulSet pod) while the agent's view of Kubernetes lags
// (an etcd outage): the new sandbox (c2) took the pod's address over
// before the old sandbox's DEL, and the deletion of the old pod object
// arrives last. The deletion names the address the new sandbox holds;
// releasing it would hand the address of a running pod to the next pod.
// Only the holding sandbox's DEL (or CNI GC) releases it. An allocation
// whose holder is unknown (recovered from the Kubernetes state) is still
// released by the deletion, as TestPodDeletedFromKubeState checks.
func TestLateKubeDeletionKeepsSandboxAddress(t *testing.T) {
	for _, withStore := range []bool{false, true} {
		t.Run(fmt.Sprintf("store=%v", withStore), func(t *testing.T) {
			store := &ipamtest.MemStore{}
			cfg := ipam.Config{}
			if withStore {
				cfg.Store = store
			}
			i := newReady(t, 5, cfg)
			web := pod("web")
			update(t, i, controller.NewAddPodEvent(web, "c1", "/proc/1/ns/net"))
			update(t, i, controller.NewAddPodEvent(web, "c2", "/proc/2/ns/net"))
			update(t, i, controller.NewDeletePodEvent(web, "c1"))
			addr, ok := i.PodAddr(web)
			require.True(t, ok)

			old := kpod("web", addr.String())
			desc := update(t, i, &controller.KubeStateChange{Resource: kubemodel.PodResource, Key: kubemodel.PodKey(old.Namespace, old.Name), PrevValue: old})
			assert.Equal(t, "pod default/web deleted from Kubernetes: 10.1.5.2 stays with sandbox c2 until its DEL", desc)
			got, ok := i.PodAddr(web)
			require.True(t, ok, "the late deletion of the old pod object released the address of the running sandbox c2")
			require.Equal(t, addr, got)
			next, err := i.AllocatePodAddr(pod("next"))
			require.NoError(t, err)
			require.NotEqual(t, addr, next, "duplicate pod IP")
			if withStore {
				assert.Len(t, store.Records(), 2)
			}

			update(t, i, controller.NewDeletePodEvent(web, "c2"))
			_, ok = i.PodAddr(web)
			assert.False(t, ok, "the holding sandbox's DEL releases")
		})
	}
}
