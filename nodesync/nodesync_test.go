package nodesync_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/controllertest"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/internal/testseed"
	"github.com/vswitchkit/vswitchkit/nodesync"
	"github.com/vswitchkit/vswitchkit/nodesync/nodesyncmodel"
	"github.com/vswitchkit/vswitchkit/nodesync/nodesynctest"
	"google.golang.org/protobuf/proto"
)

// seedNode stores the claim and the record of a node that joined earlier.
func seedNode(t *testing.T, db testDB, id uint32, name string, ips ...*nodesyncmodel.IPWithNetwork) {
	t.Helper()
	claim, err := proto.Marshal(&nodesyncmodel.NodeIDClaim{Id: id, Name: name})
	require.NoError(t, err)
	ok, err := db.PutIfNotExists(fmt.Sprintf("%sid/%d", testPrefix, id), claim)
	require.NoError(t, err)
	require.True(t, ok)
	putRecord(t, db, &nodesyncmodel.VswitchNode{Id: id, Name: name, IpAddresses: ips})
}

func vppIP(addr, network string) *nodesyncmodel.IPWithNetwork {
	return &nodesyncmodel.IPWithNetwork{Address: addr, Network: network}
}

type wantUpdate struct {
	name       string
	prev, next *nodesync.Node
}

func TestNodeUpdates(t *testing.T) {
	kubeA := kubeNode("node-a", []string{"10.1.1.0/24"}, "10.0.0.1")
	kubeB := kubeNode("node-b", []string{"10.1.2.0/24"}, "10.0.0.2")
	nodeA := &nodesync.Node{ID: 1, Name: "node-a", MgmtIPAddresses: mgmt("10.0.0.1"), PodCIDRs: prefixes("10.1.1.0/24")}
	nodeB := &nodesync.Node{
		ID: 2, Name: "node-b",
		VppIPAddresses:  nodesync.IPsWithNetworks{ipNet("192.168.16.2", "192.168.16.0/24")},
		MgmtIPAddresses: mgmt("10.0.0.2"), PodCIDRs: prefixes("10.1.2.0/24"),
	}
	with := func(n *nodesync.Node, f func(*nodesync.Node)) *nodesync.Node {
		c := n.Clone()
		f(c)
		return c
	}

	tests := []struct {
		name string
		// act changes the cluster and returns how many record changes
		// (writes under node/) it made.
		act  func(t *testing.T, h *harness) int
		want []wantUpdate
	}{
		{
			name: "other node joins",
			act: func(t *testing.T, h *harness) int {
				putRecord(t, h.db, &nodesyncmodel.VswitchNode{Id: 3, Name: "node-c", IpAddresses: []*nodesyncmodel.IPWithNetwork{vppIP("192.168.16.3", "192.168.16.0/24")}})
				return 1
			},
			want: []wantUpdate{{"node-c", nil, &nodesync.Node{ID: 3, Name: "node-c", VppIPAddresses: nodesync.IPsWithNetworks{ipNet("192.168.16.3", "192.168.16.0/24")}}}},
		},
		{
			name: "other node still waiting for its ID is not reported",
			act: func(t *testing.T, h *harness) int {
				putRecord(t, h.db, &nodesyncmodel.VswitchNode{Name: "node-c"})
				return 1
			},
		},
		{
			name: "other node changes VPP IPs",
			act: func(t *testing.T, h *harness) int {
				putRecord(t, h.db, &nodesyncmodel.VswitchNode{Id: 2, Name: "node-b", IpAddresses: []*nodesyncmodel.IPWithNetwork{vppIP("192.168.16.12", "192.168.16.0/24"), vppIP("fd00::2", "fd00::/64")}})
				return 1
			},
			want: []wantUpdate{{"node-b", nodeB, with(nodeB, func(n *nodesync.Node) {
				n.VppIPAddresses = nodesync.IPsWithNetworks{ipNet("192.168.16.12", "192.168.16.0/24"), ipNet("fd00::2", "fd00::/64")}
			})}},
		},
		{
			name: "other node rewrites the same record",
			act: func(t *testing.T, h *harness) int {
				putRecord(t, h.db, &nodesyncmodel.VswitchNode{Id: 2, Name: "node-b", IpAddresses: []*nodesyncmodel.IPWithNetwork{vppIP("192.168.16.2", "192.168.16.0/24")}})
				return 1
			},
		},
		{
			name: "other node leaves: record released, then Kubernetes node deleted",
			act: func(t *testing.T, h *harness) int {
				deleteRecord(t, h.db, "node-b")
				n := h.pump(1)
				h.updates = n // keep for the result
				h.kubeChange(kubeB, nil)
				return 0
			},
			want: []wantUpdate{
				{"node-b", nodeB, with(nodeB, func(n *nodesync.Node) { n.ID = 0; n.VppIPAddresses = nil })},
				{"node-b", with(nodeB, func(n *nodesync.Node) { n.ID = 0; n.VppIPAddresses = nil }), nil},
			},
		},
		{
			name: "other node changes management IPs",
			act: func(t *testing.T, h *harness) int {
				h.kubeChange(kubeB, kubeNode("node-b", []string{"10.1.2.0/24"}, "10.0.0.22", "10.0.0.2"))
				return 0
			},
			want: []wantUpdate{{"node-b", nodeB, with(nodeB, func(n *nodesync.Node) { n.MgmtIPAddresses = mgmt("10.0.0.22", "10.0.0.2") })}},
		},
		{
			name: "other node changes pod CIDR",
			act: func(t *testing.T, h *harness) int {
				h.kubeChange(kubeB, kubeNode("node-b", []string{"10.1.3.0/24"}, "10.0.0.2"))
				return 0
			},
			want: []wantUpdate{{"node-b", nodeB, with(nodeB, func(n *nodesync.Node) { n.PodCIDRs = prefixes("10.1.3.0/24") })}},
		},
		{
			name: "Kubernetes-only node appears with ID 0",
			act: func(t *testing.T, h *harness) int {
				h.kubeChange(nil, kubeNode("node-k", nil, "10.0.0.9"))
				return 0
			},
			want: []wantUpdate{{"node-k", nil, &nodesync.Node{Name: "node-k", MgmtIPAddresses: mgmt("10.0.0.9")}}},
		},
		{
			name: "unchanged Kubernetes node is not reported",
			act: func(t *testing.T, h *harness) int {
				h.kubeChange(kubeB, kubeNode("node-b", []string{"10.1.2.0/24"}, "10.0.0.2"))
				return 0
			},
		},
		{
			name: "this node changes management IPs",
			act: func(t *testing.T, h *harness) int {
				h.kubeChange(kubeA, kubeNode("node-a", []string{"10.1.1.0/24"}, "10.0.0.11"))
				return 0
			},
			want: []wantUpdate{{"node-a", nodeA, with(nodeA, func(n *nodesync.Node) { n.MgmtIPAddresses = mgmt("10.0.0.11") })}},
		},
		{
			name: "this node changes pod CIDR",
			act: func(t *testing.T, h *harness) int {
				h.kubeChange(kubeA, kubeNode("node-a", []string{"10.1.9.0/24"}, "10.0.0.1"))
				return 0
			},
			want: []wantUpdate{{"node-a", nodeA, with(nodeA, func(n *nodesync.Node) { n.PodCIDRs = prefixes("10.1.9.0/24") })}},
		},
		{
			name: "this node publishing VPP IPs is not reported",
			act: func(t *testing.T, h *harness) int {
				require.NoError(t, h.ns.PublishNodeIPs(nodesync.IPsWithNetworks{ipNet("192.168.16.1", "192.168.16.0/24")}, nodesync.IPv4))
				return 1 // the watch still delivers the write
			},
		},
		{
			name: "malformed record of another node is skipped",
			act: func(t *testing.T, h *harness) int {
				h.db.PutRaw(testPrefix+"node/node-x", []byte("\xff\xff not a protobuf"))
				h.db.PutRaw(testPrefix+"node/node-z", mustMarshal(t, &nodesyncmodel.VswitchNode{Id: 7, Name: "node-y"}))
				h.db.PutRaw(testPrefix+"node/node-w", mustMarshal(t, &nodesyncmodel.VswitchNode{Id: 8, Name: "node-w",
					IpAddresses: []*nodesyncmodel.IPWithNetwork{vppIP("192.168.16.300", "192.168.16.0/24")}}))
				return 3
			},
		},
	}
	for backend, newDB := range backends(t) {
		for _, tc := range tests {
			t.Run(backend+"/"+tc.name, func(t *testing.T) {
				db := newDB(t)
				seedNode(t, db, 2, "node-b", vppIP("192.168.16.2", "192.168.16.0/24"))
				h := startHarness(t, db, "node-a", nodesync.Config{})
				require.Equal(t, uint32(1), h.ns.GetNodeID())
				h.resync(1, kubeA, kubeB)
				h.pump(0)
				require.Equal(t, nodesync.Nodes{"node-a": nodeA, "node-b": nodeB}, h.ns.GetAllNodes())

				n := tc.act(t, h)
				got := h.pump(n)
				require.Len(t, got, len(tc.want), "updates: %v", got)
				for i, w := range tc.want {
					assert.Equal(t, w.name, got[i].NodeName, "update %d", i)
					assert.Equal(t, w.prev, got[i].PrevState, "update %d PrevState", i)
					assert.Equal(t, w.next, got[i].NewState, "update %d NewState", i)
					assert.Equal(t, controller.Update, got[i].Method())
					assert.Equal(t, controller.Forward, got[i].Direction())
					assert.Equal(t, controller.BestEffort, got[i].TransactionType())
				}
				if len(tc.want) > 0 {
					last := tc.want[len(tc.want)-1]
					if last.next == nil {
						assert.NotContains(t, h.ns.GetAllNodes(), last.name)
					} else {
						assert.Equal(t, last.next, h.ns.GetAllNodes()[last.name])
					}
				}
			})
		}
	}
}

func mustMarshal(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	require.NoError(t, err)
	return b
}

func TestRestartReusesID(t *testing.T) {
	tests := []struct {
		name   string
		seed   func(t *testing.T, db testDB)
		wantID uint32
	}{
		{
			name:   "first start on an empty cluster",
			seed:   func(*testing.T, testDB) {},
			wantID: 1,
		},
		{
			name: "restart finds its ID by name",
			seed: func(t *testing.T, db testDB) {
				seedNode(t, db, 1, "node-b")
				seedNode(t, db, 2, "node-a")
				seedNode(t, db, 3, "node-c")
			},
			wantID: 2,
		},
		{
			name: "restart after a crash between claim and record update",
			seed: func(t *testing.T, db testDB) {
				seedNode(t, db, 1, "node-b")
				ok, err := db.PutIfNotExists(testPrefix+"id/5", mustMarshal(t, &nodesyncmodel.NodeIDClaim{Id: 5, Name: "node-a"}))
				require.NoError(t, err)
				require.True(t, ok)
				putRecord(t, db, &nodesyncmodel.VswitchNode{Name: "node-a"})
			},
			wantID: 5,
		},
		{
			name: "released node gets the smallest free ID",
			seed: func(t *testing.T, db testDB) {
				seedNode(t, db, 1, "node-b")
				seedNode(t, db, 2, "node-a")
				seedNode(t, db, 4, "node-c")
				ids, err := nodesync.ReleaseNode(context.Background(), db, "", "node-a")
				require.NoError(t, err)
				require.Equal(t, []uint32{2}, ids)
				_, err = nodesync.ReleaseNode(context.Background(), db, "", "node-b")
				require.NoError(t, err)
			},
			wantID: 1,
		},
		{
			name: "malformed claims keep their IDs taken",
			seed: func(t *testing.T, db testDB) {
				db.PutRaw(testPrefix+"id/1", []byte("garbage"))
				db.PutRaw(testPrefix+"id/x", []byte("garbage"))
				seedNode(t, db, 2, "node-b")
			},
			wantID: 3,
		},
		{
			name: "own record with a stale ID that another node owns now",
			seed: func(t *testing.T, db testDB) {
				seedNode(t, db, 1, "node-b")
				putRecord(t, db, &nodesyncmodel.VswitchNode{Id: 1, Name: "node-a"})
			},
			wantID: 2,
		},
	}
	for backend, newDB := range backends(t) {
		for _, tc := range tests {
			t.Run(backend+"/"+tc.name, func(t *testing.T) {
				db := newDB(t)
				tc.seed(t, db)
				for run := range 2 { // start, stop, start again
					h := startHarness(t, db, "node-a", nodesync.Config{})
					require.Equal(t, tc.wantID, h.ns.GetNodeID(), "run %d", run)
					h.resync(1)
					require.Equal(t, tc.wantID, h.ns.GetAllNodes()["node-a"].ID, "run %d", run)
				}
				claims := 0
				for _, k := range db.Keys() {
					if !strings.HasPrefix(k, testPrefix+"id/") {
						continue
					}
					v, _ := db.Value(k)
					var c nodesyncmodel.NodeIDClaim
					if proto.Unmarshal(v, &c) == nil && c.GetName() == "node-a" {
						claims++
					}
				}
				require.Equal(t, 1, claims, "exactly one claim names node-a: %v", db.Keys())
			})
		}
	}
}

func TestReleaseNode(t *testing.T) {
	db := nodesynctest.NewMemDB()
	a := startHarness(t, db, "node-a", nodesync.Config{})
	b := startHarness(t, db, "node-b", nodesync.Config{})
	require.Equal(t, uint32(1), a.ns.GetNodeID())
	require.Equal(t, uint32(2), b.ns.GetNodeID())

	ids, err := nodesync.ReleaseNode(context.Background(), db, "", "node-a")
	require.NoError(t, err)
	require.Equal(t, []uint32{1}, ids)
	err = <-a.done
	require.ErrorIs(t, err, nodesync.ErrNodeReleased, "a released node stops using its ID")
	a.done <- err // for the cleanup

	c := startHarness(t, db, "node-c", nodesync.Config{})
	require.Equal(t, uint32(1), c.ns.GetNodeID(), "the released ID is free again")

	ids, err = nodesync.ReleaseNode(context.Background(), db, "", "node-unknown")
	require.NoError(t, err)
	require.Empty(t, ids)
	_, err = nodesync.ReleaseNode(context.Background(), db, "no-slash", "node-c")
	require.Error(t, err)
	_, err = nodesync.ReleaseNode(context.Background(), db, "", "Bad_Name")
	require.Error(t, err)
}

func TestNoFreeID(t *testing.T) {
	db := nodesynctest.NewMemDB()
	seedNode(t, db, 1, "node-b")
	seedNode(t, db, 2, "node-c")
	ns, err := nodesync.New("node-a", db, &controllertest.EventRecorder{}, nodesync.Config{MaxNodeID: 2})
	require.NoError(t, err)
	err = ns.Run(context.Background())
	require.ErrorIs(t, err, nodesync.ErrNoFreeID)
	require.Zero(t, ns.GetNodeID())
	err = ns.Resync(controller.NewDBResync(), controller.NewKubeStateData(), 1, controllertest.NewTxn())
	require.ErrorIs(t, err, nodesync.ErrNotReady)
	require.ErrorIs(t, ns.Run(context.Background()), nodesync.ErrAlreadyRunning)
}

func TestWaitsForConnection(t *testing.T) {
	db := nodesynctest.NewDisconnectedMemDB()
	ns, err := nodesync.New("node-a", db, &controllertest.EventRecorder{}, nodesync.Config{StartupTimeout: 1})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ns.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()

	err = ns.Resync(controller.NewDBResync(), controller.NewKubeStateData(), 1, controllertest.NewTxn())
	require.ErrorIs(t, err, nodesync.ErrNotReady, "start-up resync before the ID is allocated")
	require.ErrorIs(t, ns.PublishNodeIPs(nil, nodesync.IPv4), nodesync.ErrNotReady)
	require.Empty(t, ns.GetAllNodes())

	db.SetConnected(true)
	<-ns.Ready()
	require.Equal(t, uint32(1), ns.GetNodeID())
	require.NoError(t, ns.Resync(controller.NewDBResync(), controller.NewKubeStateData(), 2, controllertest.NewTxn()))
}

func TestAllocationRetriesDBFaults(t *testing.T) {
	ticket := testPrefix + "alloc/ticket"
	claim1 := testPrefix + "id/1"
	tests := []struct {
		name string
		// faults maps a fault kind to how many times it strikes.
		faults map[string]int
	}{
		{"requests fail before they are applied", map[string]int{"ticket": 3, "claim": 2, "list": 3}},
		{"ticket taken but the answer lost", map[string]int{"ticket-applied": 2}},
		{"claim made but the answer lost", map[string]int{"claim-applied": 2}},
		{"everything lost once", map[string]int{"ticket": 1, "ticket-applied": 1, "claim": 1, "claim-applied": 1, "list": 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			db := nodesynctest.NewMemDB()
			seedNode(t, db, 2, "node-b")
			var mu sync.Mutex
			fails := maps.Clone(tc.faults)
			fail := func(kind string) error {
				mu.Lock()
				defer mu.Unlock()
				if fails[kind] > 0 {
					fails[kind]--
					return nodesynctest.ErrInjected
				}
				return nil
			}
			kind := func(key string) string {
				switch key {
				case ticket:
					return "ticket"
				case claim1:
					return "claim"
				}
				return ""
			}
			db.SetHooks(nodesynctest.Hooks{
				List:       func(string) error { return fail("list") },
				Txn:        func(key string) error { return fail(kind(key)) },
				TxnApplied: func(key string) error { return fail(kind(key) + "-applied") },
			})
			h := startHarness(t, db, "node-a", nodesync.Config{RetryBackoff: 1})
			require.Equal(t, uint32(1), h.ns.GetNodeID(), "no ticket is lost to a failed request")
			mu.Lock()
			for kind, n := range fails {
				require.Zero(t, n, "all %s faults were hit", kind)
			}
			mu.Unlock()
			// Exactly one claim names node-a, and the next node gets 3.
			require.Equal(t, []string{testPrefix + "alloc/ticket", testPrefix + "id/1", testPrefix + "id/2", testPrefix + "node/node-a", testPrefix + "node/node-b"}, db.Keys())
			db.SetHooks(nodesynctest.Hooks{})
			c := startHarness(t, db, "node-c", nodesync.Config{})
			require.Equal(t, uint32(3), c.ns.GetNodeID())
		})
	}
}

func TestPublishNodeIPs(t *testing.T) {
	db := nodesynctest.NewMemDB()
	h := startHarness(t, db, "node-a", nodesync.Config{})
	h.resync(1)
	puts := 0
	db.SetHooks(nodesynctest.Hooks{Put: func(string) error { puts++; return nil }})
	v4 := nodesync.IPsWithNetworks{ipNet("192.168.16.1", "192.168.16.0/24"), ipNet("10.10.0.1", "10.10.0.0/16")}
	v6 := nodesync.IPsWithNetworks{ipNet("fd00::1", "fd00::/64")}

	steps := []struct {
		name     string
		ips      nodesync.IPsWithNetworks
		version  nodesync.IPVersion
		wantErr  bool
		wantPuts int
		wantAll  nodesync.IPsWithNetworks
	}{
		{"first IPv4 set is written", v4, nodesync.IPv4, false, 1, v4.Canonical()},
		{"same set in another order is not written", nodesync.IPsWithNetworks{v4[1], v4[0], v4[1]}, nodesync.IPv4, false, 1, v4.Canonical()},
		{"IPv6 set is added", v6, nodesync.IPv6, false, 2, append(v4, v6...).Canonical()},
		{"IPv4 set shrinks", v4[:1], nodesync.IPv4, false, 3, append(v4[:1:1], v6...).Canonical()},
		{"IPv6 address published as IPv4", v6, nodesync.IPv4, true, 3, append(v4[:1:1], v6...).Canonical()},
		{"address outside its network", nodesync.IPsWithNetworks{ipNet("192.168.17.1", "192.168.16.0/24")}, nodesync.IPv4, true, 3, append(v4[:1:1], v6...).Canonical()},
		{"invalid version", v4, nodesync.IPVersion(5), true, 3, append(v4[:1:1], v6...).Canonical()},
		{"zero value entry", nodesync.IPsWithNetworks{{}}, nodesync.IPv4, true, 3, append(v4[:1:1], v6...).Canonical()},
		{"empty IPv6 set removes IPv6", nil, nodesync.IPv6, false, 4, v4[:1]},
	}
	for _, s := range steps {
		err := h.ns.PublishNodeIPs(s.ips, s.version)
		if s.wantErr {
			require.Error(t, err, s.name)
		} else {
			require.NoError(t, err, s.name)
		}
		require.Equal(t, s.wantPuts, puts, s.name)
		require.Equal(t, s.wantAll, h.ns.GetAllNodes()["node-a"].VppIPAddresses, s.name)
	}

	// Another NodeSync sees the published IPs.
	other := startHarness(t, db, "node-b", nodesync.Config{})
	other.resync(1)
	require.Equal(t, v4[:1], other.ns.GetAllNodes()["node-a"].VppIPAddresses)

	// A restarted node keeps publishing "only on change" against what is stored.
	db.SetHooks(nodesynctest.Hooks{Put: func(string) error { return errors.New("must not write") }})
	require.NoError(t, h.ns.PublishNodeIPs(v4[:1], nodesync.IPv4))
}

func TestGetAllNodesReturnsCopy(t *testing.T) {
	db := nodesynctest.NewMemDB()
	h := startHarness(t, db, "node-a", nodesync.Config{})
	h.resync(1, kubeNode("node-a", []string{"10.1.1.0/24"}, "10.0.0.1"))
	all := h.ns.GetAllNodes()
	all["node-a"].ID = 99
	all["node-a"].MgmtIPAddresses[0][0] = 99
	all["node-a"].PodCIDRs[0] = netipPrefix("10.9.9.0/24")
	delete(all, "node-a")
	again := h.ns.GetAllNodes()
	require.Equal(t, uint32(1), again["node-a"].ID)
	require.Equal(t, mgmt("10.0.0.1"), again["node-a"].MgmtIPAddresses)
	require.Equal(t, prefixes("10.1.1.0/24"), again["node-a"].PodCIDRs)
}

func TestWatchCompactionRelists(t *testing.T) {
	db := nodesynctest.NewMemDB()
	h := startHarness(t, db, "node-a", nodesync.Config{RetryBackoff: 1})
	h.resync(1)
	h.pump(0)
	// Break the watch: compact, then disconnect briefly while changes happen.
	db.SetConnected(false)
	putRecordRaw(t, db, &nodesyncmodel.VswitchNode{Id: 2, Name: "node-b"})
	putRecordRaw(t, db, &nodesyncmodel.VswitchNode{Id: 3, Name: "node-c"})
	db.Compact(db.Revision())
	db.SetConnected(true)
	// The watcher re-lists and pushes one record resync.
	got := h.pump(1)
	require.Len(t, got, 2)
	require.Equal(t, "node-b", got[0].NodeName)
	require.Equal(t, "node-c", got[1].NodeName)
	require.Nil(t, got[0].PrevState)
	require.Equal(t, uint32(3), got[1].NewState.ID)
}

func TestPushFailureRelists(t *testing.T) {
	db := nodesynctest.NewMemDB()
	failed := make(chan struct{})
	var armed, once atomic.Bool
	rec := &controllertest.EventRecorder{PushErr: func(ev controller.Event) error {
		if armed.Load() && ev.GetName() == "Vswitch Node Record Change" && once.CompareAndSwap(false, true) {
			close(failed)
			return controller.ErrQueueFull
		}
		return nil
	}}
	h := launchHarness(t, db, "node-a", nodesync.Config{RetryBackoff: 1}, rec)
	h.waitReady()
	h.resync(1)
	h.pump(0)
	armed.Store(true)
	putRecord(t, db, &nodesyncmodel.VswitchNode{Id: 2, Name: "node-b"})
	<-failed
	got := h.pump(1) // the record resync after the failed push
	require.Len(t, got, 1)
	require.Equal(t, "node-b", got[0].NodeName)
}

func TestHandlesEvent(t *testing.T) {
	db := nodesynctest.NewMemDB()
	ns, err := nodesync.New("node-a", db, &controllertest.EventRecorder{}, nodesync.Config{})
	require.NoError(t, err)
	tests := []struct {
		ev   controller.Event
		want bool
	}{
		{controller.NewDBResync(), true},
		{&controller.HealingResync{Type: controller.AfterError}, true},
		{&controller.HealingResync{Type: controller.Periodic}, false},
		{&controller.KubeStateChange{Resource: kubemodel.NodeResource}, true},
		{&controller.KubeStateChange{Resource: kubemodel.PodResource}, false},
		{&nodesync.NodeUpdate{}, false},
		{controller.NewAddPodEvent(kubemodel.PodID{Namespace: "ns", Name: "p"}, "c", "/netns"), false},
	}
	for _, tc := range tests {
		assert.Equal(t, tc.want, ns.HandlesEvent(tc.ev), tc.ev.GetName())
	}
	require.NoError(t, ns.Revert(controller.NewDBResync()))
	require.Equal(t, "nodesync", ns.String())
}

func TestNewValidates(t *testing.T) {
	db := nodesynctest.NewMemDB()
	loop := &controllertest.EventRecorder{}
	tests := []struct {
		name string
		node string
		db   nodesync.ClusterWideDB
		loop controller.EventLoop
		cfg  nodesync.Config
	}{
		{"empty node name", "", db, loop, nodesync.Config{}},
		{"invalid node name", "Node_A", db, loop, nodesync.Config{}},
		{"nil DB", "node-a", nil, loop, nodesync.Config{}},
		{"nil loop", "node-a", db, nil, nodesync.Config{}},
		{"prefix without slash", "node-a", db, loop, nodesync.Config{Prefix: "/x"}},
		{"negative timeout", "node-a", db, loop, nodesync.Config{RequestTimeout: -1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := nodesync.New(tc.node, tc.db, tc.loop, tc.cfg)
			require.Error(t, err)
		})
	}
	_, err := nodesync.New("node-a", db, loop, nodesync.Config{})
	require.NoError(t, err, "zero Config is valid")
}

func TestConcurrentJoinMemDB(t *testing.T) {
	const n = 100
	db := nodesynctest.NewMemDB()
	seen := make(map[uint32]string)
	hs := make([]*harness, n)
	for i := range n {
		hs[i] = launchHarness(t, db, fmt.Sprintf("node-%03d", i), nodesync.Config{}, &controllertest.EventRecorder{})
	}
	for _, h := range hs {
		h.waitReady()
	}
	for _, h := range hs {
		id := h.ns.GetNodeID()
		require.NotContains(t, seen, id)
		seen[id] = h.ns.NodeName()
		require.True(t, id >= 1 && id <= n, "ID %d in 1..%d", id, n)
	}
}

func TestReleaser(t *testing.T) {
	db := nodesynctest.NewMemDB()
	seedNode(t, db, 1, "node-a")
	seedNode(t, db, 2, "node-b")
	r, err := nodesync.NewReleaser(db, nodesync.Config{})
	require.NoError(t, err)
	_, err = nodesync.NewReleaser(nil, nodesync.Config{})
	require.Error(t, err)

	update := &controller.KubeStateChange{Key: kubemodel.NodeKey("node-b"), Resource: kubemodel.NodeResource, NewValue: kubeNode("node-b", nil)}
	require.False(t, r.HandlesEvent(update), "node updates are not deletions")
	require.False(t, r.HandlesEvent(controller.NewDBResync()))
	del := &controller.KubeStateChange{Key: kubemodel.NodeKey("node-b"), Resource: kubemodel.NodeResource, PrevValue: kubeNode("node-b", nil)}
	require.True(t, r.HandlesEvent(del))
	desc, err := r.Update(del, controllertest.NewTxn())
	require.NoError(t, err)
	require.Contains(t, desc, "node-b")
	require.Equal(t, []string{testPrefix + "alloc/free/0000000002", testPrefix + "id/1", testPrefix + "node/node-a"}, db.Keys(),
		"the record and the claim are gone, the ID is hinted as free")

	// A joining node gets the freed ID.
	h := startHarness(t, db, "node-c", nodesync.Config{})
	require.Equal(t, uint32(2), h.ns.GetNodeID())

	db.SetHooks(nodesynctest.Hooks{Txn: func(string) error { return nodesynctest.ErrInjected }})
	del.Key = kubemodel.NodeKey("node-a")
	_, err = r.Update(del, controllertest.NewTxn())
	require.ErrorIs(t, err, nodesynctest.ErrInjected, "a failed release is reported")
}

// TestNodeEqualCoversAllFields fails when a field is added to Node without
// being handled by Equal and Clone.
func TestNodeEqualCoversAllFields(t *testing.T) {
	full := &nodesync.Node{
		ID: 1, Name: "n",
		VppIPAddresses:  nodesync.IPsWithNetworks{ipNet("192.168.16.1", "192.168.16.0/24")},
		MgmtIPAddresses: mgmt("10.0.0.1"),
		PodCIDRs:        prefixes("10.1.1.0/24"),
	}
	typ := reflect.TypeFor[nodesync.Node]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		v := reflect.ValueOf(full.Clone()).Elem().Field(i)
		require.False(t, v.IsZero(), "field %s must be set in the test node", f.Name)
		changed := full.Clone()
		reflect.ValueOf(changed).Elem().Field(i).SetZero()
		require.False(t, full.Equal(changed), "Equal ignores field %s", f.Name)
		require.True(t, full.Equal(full.Clone()), "Clone loses field %s", f.Name)
	}
	c := full.Clone()
	c.MgmtIPAddresses[0][0] = 99
	c.VppIPAddresses[0] = nodesync.IPWithNetwork{}
	c.PodCIDRs[0] = netipPrefix("10.9.9.0/24")
	require.Equal(t, mgmt("10.0.0.1"), full.MgmtIPAddresses, "Clone is deep")
	require.Equal(t, prefixes("10.1.1.0/24"), full.PodCIDRs)
	require.True(t, (*nodesync.Node)(nil).Equal(nil))
	require.False(t, full.Equal(nil))
}

// TestJoinReleaseRestart mixes a join storm, releases of stopped nodes and
// a second storm of new nodes together with restarting old ones: IDs stay
// unique, restarted nodes keep theirs, and the freed IDs are reused so that
// the IDs in use are exactly 1..N again.
func TestJoinReleaseRestart(t *testing.T) {
	db := nodesynctest.NewMemDB()
	type node struct {
		name   string
		cancel context.CancelFunc
		done   chan error
		ns     *nodesync.NodeSync
	}
	start := func(name string) *node {
		ns, err := nodesync.New(name, db, &controllertest.EventRecorder{}, nodesync.Config{})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		n := &node{name: name, cancel: cancel, done: make(chan error, 1), ns: ns}
		go func() { n.done <- ns.Run(ctx) }()
		return n
	}
	stop := func(n *node) {
		n.cancel()
		require.ErrorIs(t, <-n.done, context.Canceled)
	}
	ready := func(nodes []*node) {
		for _, n := range nodes {
			select {
			case <-n.ns.Ready():
			case err := <-n.done:
				t.Fatalf("%s: Run ended: %v", n.name, err)
			}
		}
	}

	var first []*node
	for i := range 40 {
		first = append(first, start(fmt.Sprintf("first-%02d", i)))
	}
	ready(first)
	ids := make(map[string]uint32)
	for _, n := range first {
		ids[n.name] = n.ns.GetNodeID()
	}
	// Stop every second node; release half of the stopped ones, the other
	// half restarts below.
	var running, restart []*node
	for i, n := range first {
		if i%2 == 0 {
			running = append(running, n)
			continue
		}
		stop(n)
		if i%4 == 1 {
			_, err := nodesync.ReleaseNode(context.Background(), db, "", n.name)
			require.NoError(t, err)
		} else {
			restart = append(restart, n)
		}
	}
	var second []*node
	for i := range 20 {
		second = append(second, start(fmt.Sprintf("second-%02d", i)))
	}
	for _, n := range restart {
		second = append(second, start(n.name))
	}
	ready(second)
	all := append(running, second...)
	seen := make(map[uint32]string)
	for _, n := range all {
		id := n.ns.GetNodeID()
		require.NotContains(t, seen, id, "ID %d used by %s and %s", id, seen[id], n.name)
		seen[id] = n.name
		if old, ok := ids[n.name]; ok {
			require.Equal(t, old, id, "%s keeps its ID", n.name)
		}
	}
	for id := uint32(1); id <= uint32(len(all)); id++ {
		require.Contains(t, seen, id, "IDs are exactly 1..%d", len(all))
	}
	for _, n := range all {
		stop(n)
	}
}

func TestPublishAfterRunEnded(t *testing.T) {
	db := nodesynctest.NewMemDB()
	rec := &controllertest.EventRecorder{}
	h := launchHarness(t, db, "node-a", nodesync.Config{}, rec)
	h.waitReady()
	h.resync(1)
	_, err := nodesync.ReleaseNode(context.Background(), db, "", "node-a")
	require.NoError(t, err)
	runErr := <-h.done
	h.done <- runErr
	require.ErrorIs(t, runErr, nodesync.ErrNodeReleased)
	err = h.ns.PublishNodeIPs(nodesync.IPsWithNetworks{ipNet("192.168.16.1", "192.168.16.0/24")}, nodesync.IPv4)
	require.ErrorIs(t, err, nodesync.ErrNotReady)
	require.Equal(t, []string{testPrefix + "alloc/free/0000000001", testPrefix + "alloc/ticket"}, db.Keys(),
		"the released record is not written again")
}

func TestMgmtAddrs(t *testing.T) {
	tests := []struct {
		name string
		node *nodesync.Node
		want []netip.Addr
	}{
		{"nil node", nil, nil},
		{"no addresses", &nodesync.Node{}, nil},
		{"IPv4 in 16-byte form is unmapped", &nodesync.Node{MgmtIPAddresses: []net.IP{net.ParseIP("10.0.0.1"), net.ParseIP("fd00::1")}},
			[]netip.Addr{netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("fd00::1")}},
		{"IPv4 in 4-byte form", &nodesync.Node{MgmtIPAddresses: mgmt("10.0.0.2")}, []netip.Addr{netip.MustParseAddr("10.0.0.2")}},
		{"invalid entries are skipped", &nodesync.Node{MgmtIPAddresses: []net.IP{{1, 2, 3}, nil, net.ParseIP("10.0.0.3")}},
			[]netip.Addr{netip.MustParseAddr("10.0.0.3")}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, tc.node.MgmtAddrs())
		})
	}
}

// TestReleasePendingNode: releasing a node that crashed while waiting for
// its ID gives its ticket back as a free ID, so no hole stays behind.
func TestReleasePendingNode(t *testing.T) {
	db := nodesynctest.NewMemDB()
	// node-x takes ticket 1, and its claim fails: it is stopped while
	// pending, as if it had crashed.
	claimTried := make(chan struct{})
	var once sync.Once
	db.SetHooks(nodesynctest.Hooks{Txn: func(key string) error {
		if key == testPrefix+"id/1" {
			once.Do(func() { close(claimTried) })
			return nodesynctest.ErrInjected
		}
		return nil
	}})
	ns, err := nodesync.New("node-x", db, &controllertest.EventRecorder{}, nodesync.Config{RetryBackoff: time.Hour})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ns.Run(ctx) }()
	<-claimTried
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	db.SetHooks(nodesynctest.Hooks{})
	require.Equal(t, []string{testPrefix + "alloc/ticket", testPrefix + "node/node-x"}, db.Keys())

	ids, err := nodesync.ReleaseNode(context.Background(), db, "", "node-x")
	require.NoError(t, err)
	require.Empty(t, ids, "a pending node owned no ID")
	require.Equal(t, []string{testPrefix + "alloc/free/0000000001", testPrefix + "alloc/ticket"}, db.Keys())
	h := startHarness(t, db, "node-c", nodesync.Config{})
	require.Equal(t, uint32(1), h.ns.GetNodeID(), "the pending node's ticket is free again")
}

// TestConcurrentJoinWithRandomFaults: while 60 nodes join at once, a fifth
// of all transactions fail, half of them before and half after being
// applied (outcome unknown to the node). Every node still gets an ID, the
// IDs are exactly 1..60 (no ticket is lost), and each claim names the node
// whose record carries its ID.
func TestConcurrentJoinWithRandomFaults(t *testing.T) {
	const n = 60
	for _, seed := range testseed.Seeds(t, 0, 1, 2, 3, 4) {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			testseed.Log(t, seed)
			db := nodesynctest.NewMemDB()
			var mu sync.Mutex
			r := rand.New(rand.NewPCG(seed, 42))
			fault := func(string) error {
				mu.Lock()
				defer mu.Unlock()
				if r.IntN(10) == 0 {
					return nodesynctest.ErrInjected
				}
				return nil
			}
			db.SetHooks(nodesynctest.Hooks{Txn: fault, TxnApplied: fault})
			hs := make([]*harness, n)
			for i := range n {
				hs[i] = launchHarness(t, db, fmt.Sprintf("node-%02d", i), nodesync.Config{RetryBackoff: time.Microsecond, Logger: debugLogger()}, &controllertest.EventRecorder{})
			}
			ids := make([]uint32, n)
			for i, h := range hs {
				h.waitReady()
				ids[i] = h.ns.GetNodeID()
			}
			db.SetHooks(nodesynctest.Hooks{})
			sorted := slices.Sorted(slices.Values(ids))
			for i, id := range sorted {
				require.Equal(t, uint32(i+1), id, "IDs are exactly 1..%d: %v", n, sorted)
			}
			for i, h := range hs {
				v, ok := db.Value(fmt.Sprintf("%sid/%d", testPrefix, ids[i]))
				require.True(t, ok)
				var c nodesyncmodel.NodeIDClaim
				require.NoError(t, proto.Unmarshal(v, &c))
				require.Equal(t, h.name, c.GetName())
			}
			claims := 0
			for _, k := range db.Keys() {
				if strings.HasPrefix(k, testPrefix+"id/") {
					claims++
				}
			}
			require.Equal(t, n, claims, "no stray claims")
		})
	}
}

// TestRecordChangesBatched: however many record changes the watch
// receives while the loop is busy, at most one record-change event is
// waiting in the loop's queue; the changes are applied in order, at most
// 256 per event (each may push a NodeUpdate follow-up), with a NodeUpdate
// per joining node.
func TestRecordChangesBatched(t *testing.T) {
	db := nodesynctest.NewMemDB()
	h := startHarness(t, db, "node-a", nodesync.Config{})
	h.resync(1)
	h.pump(0)
	const n = 600
	for i := range n {
		putRecord(t, db, &nodesyncmodel.VswitchNode{Id: uint32(i + 2), Name: fmt.Sprintf("node-%03d", i)})
	}
	// Nothing processed yet: every change waits behind one event.
	var waiting []controller.Event
	require.Eventually(t, func() bool {
		waiting = nil
		for _, ev := range h.rec.Events()[h.next:] {
			if ev.GetName() == "Vswitch Node Record Change" {
				waiting = append(waiting, ev)
			}
		}
		return len(waiting) == 1 && waiting[0].String() == "Vswitch Node Record Change: 600 changes waiting"
	}, 10*time.Second, time.Millisecond, "one event for all changes")
	before := len(h.rec.Events())
	got := h.pump(n)
	require.Len(t, got, n)
	for i, u := range got {
		require.Equal(t, fmt.Sprintf("node-%03d", i), u.NodeName, "in order")
		require.Nil(t, u.PrevState)
		require.Equal(t, uint32(i+2), u.NewState.ID)
	}
	events := 0
	for _, ev := range h.rec.Events()[before-1:] {
		if ev.GetName() == "Vswitch Node Record Change" {
			events++
		}
	}
	require.Equal(t, 3, events, "600 changes in events of at most 256: the first, and two follow-ups")
	require.Len(t, h.ns.GetAllNodes(), n+1)
}

// TestInitialNodeIPs: with Config.InitialNodeIPs, a joining node writes
// its addresses with the claim of its ID: its record is written twice
// (pending, claimed) and PublishNodeIPs of the same addresses writes
// nothing; a restart keeps them.
func TestInitialNodeIPs(t *testing.T) {
	db := nodesynctest.NewMemDB()
	var puts []string
	db.SetHooks(nodesynctest.Hooks{Put: func(key string) error { puts = append(puts, key); return nil }})
	ips := func(id uint32) (nodesync.IPsWithNetworks, error) {
		return nodesync.IPsWithNetworks{ipNet(fmt.Sprintf("192.168.16.%d", id), "192.168.16.0/24")}, nil
	}
	other := startHarness(t, db, "node-b", nodesync.Config{})
	other.resync(1)
	other.pump(0)
	h := startHarness(t, db, "node-a", nodesync.Config{InitialNodeIPs: ips})
	h.resync(1)
	require.Equal(t, uint32(2), h.ns.GetNodeID())
	want := nodesync.IPsWithNetworks{ipNet("192.168.16.2", "192.168.16.0/24")}
	require.Equal(t, want, h.ns.GetAllNodes()["node-a"].VppIPAddresses)
	n := len(puts)
	require.NoError(t, h.ns.PublishNodeIPs(want, nodesync.IPv4))
	require.Len(t, puts, n, "nothing to publish")

	// The other node learns node-a with its address from the one claim.
	got := other.pump(2) // pending, claimed
	require.Len(t, got, 1)
	require.Equal(t, want, got[0].NewState.VppIPAddresses)

	// A function that fails leaves the addresses to PublishNodeIPs.
	c := startHarness(t, db, "node-c", nodesync.Config{InitialNodeIPs: func(uint32) (nodesync.IPsWithNetworks, error) {
		return nil, errors.New("no plan")
	}})
	c.resync(1)
	require.Empty(t, c.ns.GetAllNodes()["node-c"].VppIPAddresses)
}
