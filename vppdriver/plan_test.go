package vppdriver

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.fd.io/govpp/adapter"
	"go.fd.io/govpp/api"
	"google.golang.org/protobuf/proto"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppmodel"
)

// world is the planner's input without a VPP: a driver that was never
// connected (Commit records values), what VPP holds as a readback would
// record it, failures, parks, and a clock.
type world struct {
	t   *testing.T
	d   *Driver
	now time.Time
	sw  uint32 // the next sw_if_index of a held interface
}

func newWorld(t *testing.T) *world {
	d, err := New(func() adapter.VppAPI { return nil }, Config{})
	require.NoError(t, err)
	return &world{t: t, d: d, now: time.Unix(1e9, 0), sw: 1}
}

func (w *world) commit(kind controller.CommitKind, values controller.KeyValuePairs) {
	w.t.Helper()
	_, err := w.d.Commit(context.Background(), &controller.Commit{Kind: kind, Values: values})
	if len(controller.KeyErrors(err)) == 0 {
		require.NoError(w.t, err)
	}
}

func keyed(t *testing.T, msgs ...proto.Message) controller.KeyValuePairs {
	t.Helper()
	out := controller.KeyValuePairs{}
	for _, m := range msgs {
		k, err := vppmodel.KeyOf(m)
		require.NoError(t, err)
		out[k] = m
	}
	return out
}

// want commits the values (an update commit).
func (w *world) want(msgs ...proto.Message) {
	w.commit(controller.CommitUpdate, keyed(w.t, msgs...))
}

// drop commits the deletion of keys.
func (w *world) drop(keys ...string) {
	values := controller.KeyValuePairs{}
	for _, k := range keys {
		values[k] = nil
	}
	w.commit(controller.CommitUpdate, values)
}

// hold records that VPP holds the values (interfaces get sw_if_indexes).
func (w *world) hold(msgs ...proto.Message) {
	w.t.Helper()
	w.d.mu.Lock()
	defer w.d.mu.Unlock()
	for k, m := range keyed(w.t, msgs...) {
		v, err := parseValue(m)
		require.NoError(w.t, err)
		w.holdLocked(k, v)
	}
}

func (w *world) holdLocked(k string, v value) {
	sw := noIndex
	if v.kind() == kindInterface {
		sw, w.sw = w.sw, w.sw+1
	}
	w.d.holdLocked(k, found{value: v, index: sw})
	w.d.markDirtyLocked(w.d.items[k])
}

// holdHalf records that VPP holds a half-made interface of the value.
func (w *world) holdHalf(m *vppmodel.Interface) {
	w.t.Helper()
	v, err := parseValue(m)
	require.NoError(w.t, err)
	w.d.mu.Lock()
	defer w.d.mu.Unlock()
	w.holdLocked(vppmodel.InterfaceKey(m.GetName()), &halfVal{v})
}

// configured wants the values and records that VPP holds them.
func (w *world) configured(msgs ...proto.Message) {
	w.want(msgs...)
	w.hold(msgs...)
}

// fail records a failed attempt of key.
func (w *world) fail(key string, retval int32) {
	w.d.mu.Lock()
	defer w.d.mu.Unlock()
	w.d.failLocked(w.d.items[key], &VPPError{Request: "x", Retval: retval}, w.now)
}

// park parks key on deps, as an earlier pass did.
func (w *world) park(key string, deps ...string) {
	w.d.mu.Lock()
	defer w.d.mu.Unlock()
	w.d.parkLocked(w.d.items[key], deps)
}

// settle forgets the queued work: the pass that would run found nothing
// to do.
func (w *world) settle() {
	w.d.mu.Lock()
	defer w.d.mu.Unlock()
	w.d.takeDirtyLocked()
}

// plan returns the plan of the next pass at w.now, and checks that
// planning changed nothing but the planner's marks.
func (w *world) plan() string {
	w.t.Helper()
	w.d.mu.Lock()
	defer w.d.mu.Unlock()
	w.d.dueLocked(w.now)
	work := w.d.takeDirtyLocked()
	before := w.snapshotLocked()
	p := w.d.planLocked(work, w.now)
	require.Equal(w.t, before, w.snapshotLocked(), "planning changed the driver's state")
	return p.String()
}

// snapshotLocked copies the items (without their marks), the indexes and
// the queues.
func (w *world) snapshotLocked() string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(w.d.items)) {
		it := *w.d.items[k]
		it.mark = itemMarks{}
		fmt.Fprintf(&b, "%+v\n", it)
	}
	for _, idx := range []map[string]map[*item]struct{}{w.d.users, w.d.waiters} {
		for _, k := range slices.Sorted(maps.Keys(idx)) {
			var ks []string
			for it := range idx[k] {
				ks = append(ks, it.key)
			}
			slices.Sort(ks)
			fmt.Fprintf(&b, "%s: %v\n", k, ks)
		}
	}
	fmt.Fprintf(&b, "dirty %d pubq %d retries %d\n", len(w.d.dirty), len(w.d.pubq), len(w.d.retries))
	return b.String()
}

func lines(ls ...string) string {
	if len(ls) == 0 {
		return ""
	}
	return strings.Join(ls, "\n") + "\n"
}

// TestPlan pins the planner without VPP: plain inputs (what is desired,
// what VPP holds, each key's state) give an ordered plan: removals kind
// by kind from the highest, creates and updates in dependency order
// (batches separated by "--"), parks last. Planning changes nothing of
// the driver's state.
func TestPlan(t *testing.T) {
	vrf7 := &vppmodel.VrfTable{Id: 7, Label: "x"}
	loopA := &vppmodel.Interface{Name: "a", Type: vppmodel.Interface_LOOPBACK, Enabled: true, Vrf: 7, IpAddresses: []string{"10.0.0.1/24"}}
	loopA0 := &vppmodel.Interface{Name: "a", Type: vppmodel.Interface_LOOPBACK, Enabled: true, IpAddresses: []string{"10.0.0.1/24"}}
	rt7 := &vppmodel.Route{Vrf: 7, DstNetwork: "10.5.0.0/16", Paths: []*vppmodel.Path{{OutgoingInterface: "a", NextHop: "10.0.0.2"}}}
	rt0 := &vppmodel.Route{DstNetwork: "10.6.0.0/16", Paths: []*vppmodel.Path{{OutgoingInterface: "a", NextHop: "10.0.0.2"}}}
	gw := &vppmodel.Interface{Name: "gw", Type: vppmodel.Interface_LOOPBACK, Enabled: true, IpAddresses: []string{"10.1.1.1/32"}}
	pod := func(host string) *vppmodel.Interface {
		return &vppmodel.Interface{Name: "pod", Type: vppmodel.Interface_AF_PACKET, Enabled: true, Unnumbered: "gw",
			AfPacket: &vppmodel.AfPacketLink{HostIfName: host}}
	}
	podRt := &vppmodel.Route{DstNetwork: "10.1.1.2/32", Paths: []*vppmodel.Path{{OutgoingInterface: "pod"}}}
	acl := func(name string) *vppmodel.ACL {
		return &vppmodel.ACL{Name: name, Rules: []*vppmodel.ACLRule{{Action: vppmodel.ACLRule_PERMIT, SrcPrefix: "0.0.0.0/0", DstPrefix: "10.0.0.0/8"}}}
	}
	aclList := func(iface string, output ...string) *vppmodel.ACLInterface {
		return &vppmodel.ACLInterface{Interface: iface, Output: output}
	}
	kACL := vppmodel.ACLKey
	snat := &vppmodel.CnatSnat{Ip4: "192.0.2.1", ExcludedPrefixes: []string{"10.0.0.0/8"}, Policy: vppmodel.CnatSnat_K8S}
	cnatIf := func(iface string, feature, pod bool) *vppmodel.CnatInterface {
		return &vppmodel.CnatInterface{Interface: iface, Feature: feature, SnatPod: pod}
	}
	tr := func(lb vppmodel.CnatTranslation_LbType) *vppmodel.CnatTranslation {
		return &vppmodel.CnatTranslation{Vip: "10.96.0.1", Port: 80, Protocol: vppmodel.ProtoTCP, LbType: lb,
			Paths: []*vppmodel.CnatPath{{DstIp: "10.1.1.2", DstPort: 8080}}}
	}
	const (
		kSnat  = vppmodel.CnatSnatKey
		kCnatA = "vpp/cnat/interface/a"
		kTr    = "vpp/cnat/translation/tcp/10.96.0.1:80"
	)
	kList := vppmodel.ACLInterfaceKey("a")
	loopB := &vppmodel.Interface{Name: "b", Type: vppmodel.Interface_LOOPBACK, Enabled: true, IpAddresses: []string{"10.9.0.1/24"}}
	route := func(vrf uint32, dst, iface, nh string) *vppmodel.Route {
		return &vppmodel.Route{Vrf: vrf, DstNetwork: dst, Paths: []*vppmodel.Path{{OutgoingInterface: iface, NextHop: nh}}}
	}
	const (
		kVrf7  = "vpp/vrf/ipv4/7"
		kA     = "vpp/interface/a"
		kB     = "vpp/interface/b"
		kRt7   = "vpp/route/7/10.5.0.0/16"
		kRt0   = "vpp/route/0/10.6.0.0/16"
		kGw    = "vpp/interface/gw"
		kPod   = "vpp/interface/pod"
		kPodRt = "vpp/route/0/10.1.1.2/32"
	)

	tests := []struct {
		name  string
		setup func(w *world) // the state before the pass, settled
		pass  func(w *world) // what the pass is about
		want  string
	}{
		{
			name: "creates in dependency order",
			pass: func(w *world) { w.want(rt7, loopA, vrf7) },
			want: lines("create "+kVrf7, "--", "create "+kA, "--", "create "+kRt7),
		},
		{
			name: "a missing dependency parks",
			pass: func(w *world) { w.want(rt7, vrf7) },
			want: lines("create "+kVrf7, "--", "park "+kRt7+" on "+kA),
		},
		{
			name: "an unnumbered interface after its source, in a later wave",
			pass: func(w *world) { w.want(podRt, pod("veth0"), gw) },
			want: lines("create "+kGw, "--", "create "+kPod, "--", "create "+kPodRt),
		},
		{
			name: "interfaces unnumbered to each other wait for good",
			pass: func(w *world) {
				b := &vppmodel.Interface{Name: "b", Type: vppmodel.Interface_LOOPBACK, Unnumbered: "c"}
				c := &vppmodel.Interface{Name: "c", Type: vppmodel.Interface_LOOPBACK, Unnumbered: "b"}
				w.want(b, c)
			},
			want: lines("park vpp/interface/b on vpp/interface/c", "park vpp/interface/c on vpp/interface/b"),
		},
		{
			name:  "configured: nothing to do",
			setup: func(w *world) { w.configured(vrf7, loopA, rt7) },
			pass:  func(w *world) { w.want(rt7, loopA, vrf7) },
			want:  "",
		},
		{
			name:  "an in-place change updates",
			setup: func(w *world) { w.configured(vrf7, loopA, rt7) },
			pass: func(w *world) {
				w.want(&vppmodel.Interface{Name: "a", Type: vppmodel.Interface_LOOPBACK, Vrf: 7, IpAddresses: []string{"10.0.9.1/24"}},
					&vppmodel.Route{Vrf: 7, DstNetwork: "10.5.0.0/16", Paths: []*vppmodel.Path{{OutgoingInterface: "a", NextHop: "10.0.0.3"}}})
			},
			want: lines("update "+kA, "--", "update "+kRt7),
		},
		{
			name:  "a deleted interface goes after what uses it, which waits",
			setup: func(w *world) { w.configured(loopA0, rt0) },
			pass:  func(w *world) { w.drop(kA) },
			want:  lines("remove "+kRt0, "--", "remove "+kA, "--", "park "+kRt0+" on "+kA),
		},
		{
			name:  "a creation-time change re-creates, with what is applied on top",
			setup: func(w *world) { w.configured(gw, pod("veth0"), podRt) },
			pass:  func(w *world) { w.want(pod("veth1")) },
			want:  lines("remove "+kPodRt, "--", "remove "+kPod, "--", "create "+kPod, "--", "create "+kPodRt),
		},
		{
			name:  "a new table label re-creates the table and what is in it",
			setup: func(w *world) { w.configured(vrf7, loopA, rt7) },
			pass:  func(w *world) { w.want(&vppmodel.VrfTable{Id: 7, Label: "y"}) },
			want: lines("remove "+kRt7, "--", "remove "+kA, "--", "remove "+kVrf7,
				"--", "create "+kVrf7, "--", "create "+kA, "--", "create "+kRt7),
		},
		{
			name:  "an invalid value removes the object; its dependents wait",
			setup: func(w *world) { w.configured(loopA0, rt0) },
			pass: func(w *world) {
				w.commit(controller.CommitUpdate, controller.KeyValuePairs{kA: &vppmodel.Interface{Name: "a", IpAddresses: []string{"10.0.0.1/33"}}})
			},
			want: lines("remove "+kRt0, "--", "remove "+kA, "--", "park "+kRt0+" on "+kA),
		},
		{
			name: "what VPP holds and no commit mentioned is kept",
			pass: func(w *world) { w.hold(loopA0, rt0) },
			want: "",
		},
		{
			name:  "until a resync commit leaves it out",
			setup: func(w *world) { w.hold(loopA0, rt0, gw) },
			pass:  func(w *world) { w.commit(controller.CommitResync, keyed(t, gw)) },
			want:  lines("remove "+kRt0, "--", "remove "+kA),
		},
		{
			name:  "a half-made interface is re-created",
			setup: func(w *world) { w.want(loopA0) },
			pass:  func(w *world) { w.holdHalf(loopA0) },
			want:  lines("remove "+kA, "--", "create "+kA),
		},
		{
			name: "a parked route wakes with its interface",
			setup: func(w *world) {
				w.want(rt0)
				w.park(kRt0, kA)
			},
			pass: func(w *world) { w.want(loopA0) },
			want: lines("create "+kA, "--", "create "+kRt0),
		},
		{
			name: "a retry waits for its backoff",
			setup: func(w *world) {
				w.want(loopA0)
				w.fail(kA, -1)
			},
			pass: func(w *world) { w.now = w.now.Add(99 * time.Millisecond) },
			want: "",
		},
		{
			name: "then runs",
			setup: func(w *world) {
				w.want(loopA0)
				w.fail(kA, -1)
			},
			pass: func(w *world) { w.now = w.now.Add(100 * time.Millisecond) },
			want: lines("create " + kA),
		},
		{
			name: "a permanent failure is not retried",
			setup: func(w *world) {
				w.want(loopA0)
				w.fail(kA, int32(api.INVALID_VALUE))
			},
			pass: func(w *world) { w.now = w.now.Add(time.Hour) },
			want: "",
		},
		{
			name: "a failed removal waits for its backoff",
			setup: func(w *world) {
				w.hold(loopA0)
				w.drop(kA)
				w.fail(kA, -1)
			},
			pass: func(w *world) { w.want(gw) },
			want: lines("create " + kGw),
		},
		{
			name:  "a removal waits for the update that stops referring to it",
			setup: func(w *world) { w.configured(loopA0, loopB, rt0) },
			pass: func(w *world) {
				w.drop(kA)
				w.want(route(0, "10.6.0.0/16", "b", "10.9.0.2"))
			},
			want: lines("update "+kRt0, "--", "remove "+kA+" (late)"),
		},
		{
			name:  "after the creation of what the user refers to instead",
			setup: func(w *world) { w.configured(loopA0, rt0) },
			pass: func(w *world) {
				w.drop(kA)
				w.want(loopB, route(0, "10.6.0.0/16", "b", "10.9.0.2"))
			},
			want: lines("create "+kB, "--", "update "+kRt0, "--", "remove "+kA+" (late)"),
		},
		{
			name:  "an unnumbered interface switched to another source before the old source goes",
			setup: func(w *world) { w.configured(gw, pod("veth0")) },
			pass: func(w *world) {
				w.drop(kGw)
				p := pod("veth0")
				p.Unnumbered = "gw2"
				w.want(&vppmodel.Interface{Name: "gw2", Type: vppmodel.Interface_LOOPBACK, Enabled: true, IpAddresses: []string{"10.1.1.1/32"}}, p)
			},
			// The interfaces of one wave are sent together: gw2 first (the
			// pod's update waits for it in a later round of the kind).
			want: lines("create vpp/interface/gw2", "--", "update "+kPod, "--", "remove "+kGw+" (late)"),
		},
		{
			name:  "what the late removal depends on and goes goes late with it",
			setup: func(w *world) { w.configured(vrf7, loopA, loopB, rt0) },
			pass: func(w *world) {
				w.drop(kA, kVrf7)
				w.want(route(0, "10.6.0.0/16", "b", "10.9.0.2"))
			},
			want: lines("update "+kRt0, "--", "remove "+kA+" (late)", "--", "remove "+kVrf7+" (late)"),
		},
		{
			name:  "a user the plan cannot update is removed first, as before",
			setup: func(w *world) { w.configured(loopA0, rt0) },
			pass: func(w *world) {
				w.drop(kA)
				w.want(route(0, "10.6.0.0/16", "c", "10.9.0.2"))
			},
			want: lines("remove "+kRt0, "--", "remove "+kA, "--", "park "+kRt0+" on vpp/interface/c"),
		},
		{
			name: "so is a user whose update waits for its retry",
			setup: func(w *world) {
				w.configured(loopA0, loopB, rt0)
				w.want(route(0, "10.6.0.0/16", "b", "10.9.0.2"))
				w.fail(kRt0, -1)
			},
			pass: func(w *world) { w.drop(kA) },
			want: lines("remove "+kRt0, "--", "remove "+kA),
		},
		{
			name:  "and one whose removal needs a dependency re-created before the updates",
			setup: func(w *world) { w.configured(vrf7, loopA, loopB, rt0) },
			pass: func(w *world) {
				w.drop(kA)
				w.want(&vppmodel.VrfTable{Id: 7, Label: "y"}, route(0, "10.6.0.0/16", "b", "10.9.0.2"))
			},
			want: lines("remove "+kRt0, "--", "remove "+kA, "--", "remove "+kVrf7, "--", "create "+kVrf7, "--", "create "+kRt0),
		},
		{
			name:  "an ACL renamed in a pod's list: created, switched, deleted",
			setup: func(w *world) { w.configured(loopA0, acl("old"), aclList("a", "old")) },
			pass: func(w *world) {
				w.want(acl("new"), aclList("a", "new"))
				w.drop(kACL("old"))
			},
			want: lines("create "+kACL("new"), "--", "update "+kList, "--", "remove "+kACL("old")+" (late)"),
		},
		{
			name:  "an ACL changed in place",
			setup: func(w *world) { w.configured(loopA0, acl("x"), aclList("a", "x")) },
			pass:  func(w *world) { w.want(&vppmodel.ACL{Name: "x"}) },
			want:  lines("update " + kACL("x")),
		},
		{
			name:  "an interface deleted with its ACL lists: VPP drops them with it",
			setup: func(w *world) { w.configured(loopA0, acl("x"), aclList("a", "x")) },
			pass:  func(w *world) { w.drop(kA, kList) },
			want:  lines("remove "+kList+" (with "+kA+")", "--", "remove "+kA),
		},
		{
			name:  "so while they stay desired, they wait for it",
			setup: func(w *world) { w.configured(loopA0, acl("x"), aclList("a", "x")) },
			pass:  func(w *world) { w.drop(kA) },
			want:  lines("remove "+kList+" (with "+kA+")", "--", "remove "+kA, "--", "park "+kList+" on "+kA),
		},
		{
			name:  "and with an interface that goes late",
			setup: func(w *world) { w.configured(loopA0, loopB, rt0, acl("x"), aclList("a", "x")) },
			pass: func(w *world) {
				w.drop(kA, kList)
				w.want(route(0, "10.6.0.0/16", "b", "10.9.0.2"))
			},
			want: lines("remove "+kList+" (with "+kA+")", "--", "update "+kRt0, "--", "remove "+kA+" (late)"),
		},
		{
			name: "an adopted interface is released, not deleted: its lists are cleared",
			setup: func(w *world) {
				w.configured(&vppmodel.Interface{Name: "a", Type: vppmodel.Interface_EXISTING, Existing: &vppmodel.ExistingLink{VppName: "eth0"}},
					acl("x"), aclList("a", "x"))
			},
			pass: func(w *world) { w.drop(kA, kList) },
			want: lines("remove "+kList, "--", "remove "+kA),
		},
		{
			name:  "an ACL deleted that a desired list still names: the list goes first and waits",
			setup: func(w *world) { w.configured(loopA0, acl("x"), aclList("a", "x")) },
			pass:  func(w *world) { w.drop(kACL("x")) },
			want:  lines("remove "+kList, "--", "remove "+kACL("x"), "--", "park "+kList+" on "+kACL("x")),
		},
		{
			name: "cnat: the SNAT entry before the tables of interfaces",
			pass: func(w *world) { w.want(cnatIf("a", true, true), loopA0, snat) },
			want: lines("create "+kSnat, "--", "create "+kA, "--", "create "+kCnatA),
		},
		{
			name:  "a translation's new lb type re-creates it (VPP keeps the old one)",
			setup: func(w *world) { w.configured(tr(vppmodel.CnatTranslation_DEFAULT)) },
			pass:  func(w *world) { w.want(tr(vppmodel.CnatTranslation_MAGLEV)) },
			want:  lines("remove "+kTr, "--", "create "+kTr),
		},
		{
			name:  "its paths change in place",
			setup: func(w *world) { w.configured(tr(vppmodel.CnatTranslation_DEFAULT)) },
			pass: func(w *world) {
				t := tr(vppmodel.CnatTranslation_DEFAULT)
				t.Paths[0].DstPort = 8081
				w.want(t)
			},
			want: lines("update " + kTr),
		},
		{
			name:  "the cnat feature goes with its interface",
			setup: func(w *world) { w.configured(loopA0, cnatIf("a", true, false)) },
			pass:  func(w *world) { w.drop(kA, kCnatA) },
			want:  lines("remove "+kCnatA+" (with "+kA+")", "--", "remove "+kA),
		},
		{
			name:  "the SNAT tables do not: the interface leaves them first",
			setup: func(w *world) { w.configured(snat, loopA0, cnatIf("a", true, true)) },
			pass:  func(w *world) { w.drop(kA, kCnatA) },
			want:  lines("remove "+kCnatA, "--", "remove "+kA),
		},
		{
			name:  "an interface leaves the SNAT tables before the entry goes",
			setup: func(w *world) { w.configured(snat, loopA0, cnatIf("a", true, true)) },
			pass: func(w *world) {
				w.drop(kSnat)
				w.want(cnatIf("a", true, false))
			},
			want: lines("update "+kCnatA, "--", "remove "+kSnat+" (late)"),
		},
		{
			name: "NAT44 after the plugin and the interface",
			pass: func(w *world) {
				w.want(&vppmodel.Nat44Interface{Interface: "a", Inside: true}, loopA0, &vppmodel.Nat44Global{})
			},
			want: lines("create vpp/nat44/global", "--", "create "+kA, "--", "create vpp/nat44/interface/a"),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			if tc.setup != nil {
				tc.setup(w)
			}
			w.settle()
			tc.pass(w)
			require.Equal(t, tc.want, w.plan())
		})
	}
}
