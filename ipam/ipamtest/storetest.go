package ipamtest

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"testing"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/ipam"
)

// StoreHarness tells [TestStore] how to open and crash the store under
// test.
type StoreHarness struct {
	// Open returns a ready store with no records. Required.
	Open func(t *testing.T) ipam.Store
	// Crash simulates a crash of the agent that uses s: s is abandoned
	// without any clean-up (no record is deleted, no lock or lease is
	// released on purpose), and Crash returns the store the restarted
	// agent uses, over the same durable records. Required.
	Crash func(t *testing.T, s ipam.Store) ipam.Store
}

// TestStore checks an [ipam.Store] implementation: the Store contract
// (Put replaces, Delete of a missing record succeeds, List returns every
// record with its address and holder as written, IPv4 and IPv6) and the
// crash test: an agent allocates addresses for pods that are not reflected
// in the Kubernetes state yet (and one whose write is applied but reported
// failed), and re-creates the sandbox of another pod (the new sandbox's
// AddPod before the old one's DeletePod), crashes, and the restarted
// agent — a new IPAM over the store Crash returns, with the same stale
// Kubernetes state — allocates more: no address may be handed out twice,
// the DeletePod of the replaced sandbox must not release the pod's address,
// and the records must equal the restarted IPAM's allocations.
//
// Use it from a test of a Store implementation:
//
//	func TestMyStore(t *testing.T) {
//		ipamtest.TestStore(t, ipamtest.StoreHarness{Open: ..., Crash: ...})
//	}
func TestStore(t *testing.T, h StoreHarness) {
	t.Helper()
	t.Run("contract", func(t *testing.T) { storeContract(t, h.Open(t)) })
	t.Run("crash", func(t *testing.T) { storeCrash(t, h) })
}

func storeContract(t *testing.T, s ipam.Store) {
	ctx := t.Context()
	list := func() map[kubemodel.PodID]ipam.Allocation {
		t.Helper()
		recs, err := s.ListAllocations(ctx)
		if err != nil {
			t.Fatalf("ListAllocations: %v", err)
		}
		m := make(map[kubemodel.PodID]ipam.Allocation, len(recs))
		for _, r := range recs {
			if _, dup := m[r.Pod]; dup {
				t.Fatalf("ListAllocations returned pod %s twice", r.Pod)
			}
			m[r.Pod] = r
		}
		return m
	}
	want := map[kubemodel.PodID]ipam.Allocation{}
	check := func(what string) {
		t.Helper()
		if got := list(); !maps.Equal(got, want) {
			t.Fatalf("%s: ListAllocations = %v, want %v", what, got, want)
		}
	}
	putHeld := func(ns, name, addr, container string) {
		t.Helper()
		a := ipam.Allocation{Pod: kubemodel.PodID{Namespace: ns, Name: name}, Addr: netip.MustParseAddr(addr), ContainerID: container}
		if err := s.PutAllocation(ctx, a); err != nil {
			t.Fatalf("PutAllocation(%v): %v", a, err)
		}
		want[a.Pod] = a
	}
	put := func(ns, name, addr string) { t.Helper(); putHeld(ns, name, addr, "") }
	del := func(ns, name string) {
		t.Helper()
		p := kubemodel.PodID{Namespace: ns, Name: name}
		if err := s.DeleteAllocation(ctx, p); err != nil {
			t.Fatalf("DeleteAllocation(%s): %v", p, err)
		}
		delete(want, p)
	}
	check("new store")
	put("default", "web-0", "10.1.5.2")
	put("default", "web-1", "10.1.5.3")
	put("kube-system", "web-0", "10.1.5.4") // same name, other namespace
	put("v6", "pod.with.dots", "fd00:1::5:0:0:2")
	check("after puts")
	put("default", "web-0", "10.1.5.9") // replaces
	check("after a replacing put")
	putHeld("default", "held", "10.1.5.20", "3f2a9c0e51d4")
	putHeld("v6", "held", "fd00:1::5:0:0:20", "c1")
	putHeld("default", "odd-id", "10.1.5.21", " a container ID with spaces\n")
	check("after puts with holders")
	putHeld("default", "held", "10.1.5.20", "9b1e44c07a2f") // the holder moves
	putHeld("v6", "held", "fd00:1::5:0:0:20", "")           // the holder becomes unknown
	check("after replacing holders")
	del("default", "web-1")
	del("default", "web-1") // missing: not an error
	del("nowhere", "never")
	check("after deletes")
	for n := range 300 {
		put("bulk", fmt.Sprint("p", n), netip.AddrFrom4([4]byte{10, 1, byte(6 + n/250), byte(2 + n%250)}).String())
	}
	check("after 300 more puts")
}

func storeCrash(t *testing.T, h StoreHarness) {
	node := NewNodeID(5)
	podKey := func(name string) kubemodel.PodID { return kubemodel.PodID{Namespace: "default", Name: name} }
	// The Kubernetes state as the restarted agent sees it: it lags behind
	// and shows only the pod from before the first start.
	ks := controller.NewKubeStateData()
	ks[kubemodel.PodResource] = controller.KeyValuePairs{
		kubemodel.PodKey("default", "reflected"): &kubemodel.Pod{Namespace: "default", Name: "reflected", IpAddress: "10.1.5.2"},
	}
	resync := func(i *ipam.IPAM) {
		t.Helper()
		if err := i.Resync(controller.NewDBResync(), ks, 1, nil); err != nil {
			t.Fatalf("Resync: %v", err)
		}
	}

	addPod := func(i *ipam.IPAM, p kubemodel.PodID, container string) {
		t.Helper()
		if _, err := i.Update(controller.NewAddPodEvent(p, container, "/proc/1/ns/net"), nil); err != nil {
			t.Fatalf("AddPod(%s, %s): %v", p, container, err)
		}
	}

	s := h.Open(t)
	fs := &FaultStore{Store: s, Put: func(_ int, a ipam.Allocation) Fault {
		if a.Pod.Name == "ambiguous" {
			return FailAfter // applied, reported failed
		}
		return NoFault
	}}
	before, err := ipam.New(node, ipam.Config{Store: fs})
	if err != nil {
		t.Fatal(err)
	}
	resync(before)
	held := map[netip.Addr]kubemodel.PodID{netip.MustParseAddr("10.1.5.2"): podKey("reflected")}
	if _, err := before.AllocatePodAddr(podKey("ambiguous")); err == nil {
		t.Fatal("AllocatePodAddr with a failing store succeeded")
	}
	for n := range 5 {
		p := podKey(fmt.Sprint("unreflected-", n))
		a, err := before.AllocatePodAddr(p)
		if err != nil {
			t.Fatalf("AllocatePodAddr(%s): %v", p, err)
		}
		if q, dup := held[a]; dup {
			t.Fatalf("%s handed to %s and %s", a, q, p)
		}
		held[a] = p
	}
	// A pod whose sandbox is re-created: the new sandbox (c2) gets the
	// address; the old one's DEL comes after the restart.
	recreated := podKey("recreated")
	addPod(before, recreated, "c1")
	addPod(before, recreated, "c2")
	a, ok := before.PodAddr(recreated)
	if !ok {
		t.Fatal("pod recreated has no address")
	}
	if q, dup := held[a]; dup {
		t.Fatalf("%s handed to %s and %s", a, q, recreated)
	}
	held[a] = recreated

	// Crash: before is dropped without releasing anything.
	s = h.Crash(t, s)
	after, err := ipam.New(node, ipam.Config{Store: s})
	if err != nil {
		t.Fatal(err)
	}
	resync(after)
	for a, p := range held {
		if got, ok := after.PodAddr(p); !ok || got != a {
			t.Errorf("after the restart pod %s has %v (ok=%v), want %s", p, got, ok, a)
		}
	}
	// The ambiguous write was applied: its address stays reserved.
	amb, ok := after.PodAddr(podKey("ambiguous"))
	if !ok {
		t.Fatal("the applied record of pod ambiguous was not recovered")
	}
	held[amb] = podKey("ambiguous")
	if _, err := after.Update(controller.NewDeletePodEvent(recreated, "c1"), nil); err != nil {
		t.Fatalf("DeletePod(%s, c1): %v", recreated, err)
	}
	if got, ok := after.PodAddr(recreated); !ok || got != a {
		t.Fatalf("the DeletePod of replaced sandbox c1 after the restart released %s of pod %s (held by sandbox c2)", a, recreated)
	}
	for n := range 5 {
		p := podKey(fmt.Sprint("after-", n))
		a, err := after.AllocatePodAddr(p)
		if err != nil {
			t.Fatalf("AllocatePodAddr(%s): %v", p, err)
		}
		if q, dup := held[a]; dup {
			t.Errorf("duplicate: %s handed to %s after the restart, but %s holds it", a, p, q)
		}
		held[a] = p
	}
	if err := after.ReleasePodIP(podKey("ambiguous")); err != nil {
		t.Fatalf("ReleasePodIP: %v", err)
	}
	recs, err := s.ListAllocations(t.Context())
	if err != nil {
		t.Fatalf("ListAllocations: %v", err)
	}
	slices.SortFunc(recs, func(a, b ipam.Allocation) int { return a.Addr.Compare(b.Addr) })
	if got, want := recs, after.Allocations(); !slices.Equal(got, want) {
		t.Errorf("records after the restart = %v, want the allocations %v", got, want)
	}
}

// BenchmarkStore measures an [ipam.Store] under IPAM: with 200 pods
// allocated, every iteration allocates and releases one more pod's
// address (two writes to the store). Use it from a benchmark of a Store
// implementation:
//
//	func BenchmarkIPAMAllocateRelease(b *testing.B) { ipamtest.BenchmarkStore(b, openStore(b)) }
func BenchmarkStore(b *testing.B, s ipam.Store) {
	i, err := ipam.New(NewNodeID(5), ipam.Config{Store: s})
	if err != nil {
		b.Fatal(err)
	}
	if err := i.Resync(controller.NewDBResync(), controller.NewKubeStateData(), 1, nil); err != nil {
		b.Fatal(err)
	}
	for n := range 200 {
		if _, err := i.AllocatePodAddr(kubemodel.PodID{Namespace: "default", Name: fmt.Sprint("resident-", n)}); err != nil {
			b.Fatal(err)
		}
	}
	p := kubemodel.PodID{Namespace: "default", Name: "churn"}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := i.AllocatePodAddr(p); err != nil {
			b.Fatal(err)
		}
		if err := i.ReleasePodIP(p); err != nil {
			b.Fatal(err)
		}
	}
}
