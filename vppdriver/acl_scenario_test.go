package vppdriver_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.fd.io/govpp/adapter"
	"go.fd.io/govpp/adapter/socketclient"
	"go.fd.io/govpp/api"
	"go.fd.io/govpp/binapi/acl"
	interfaces "go.fd.io/govpp/binapi/interface"
	"go.fd.io/govpp/binapi/interface_types"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/vppdriver"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppdrivertest"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppmodel"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppsim"
)

// scenarioVPP is a VPP (the stand-in or a real one) that a scenario test
// runs the same steps on: the driver must send the same messages to both.
type scenarioVPP struct {
	newAdapter func() adapter.VppAPI
	restart    func() // a VPP restart: all state lost
}

func simScenarioVPP(*testing.T) scenarioVPP {
	vpp := vppsim.New(vppsim.Config{})
	return scenarioVPP{newAdapter: func() adapter.VppAPI { return vpp.NewAdapter() }, restart: vpp.Restart}
}

func realScenarioVPP(t *testing.T) scenarioVPP {
	vpp := vppdrivertest.StartRealVPP(t)
	return scenarioVPP{newAdapter: func() adapter.VppAPI { return socketclient.NewVppClient(vpp.APISocket()) }, restart: vpp.Restart}
}

// runScenario runs scenario on the stand-in and (with VPP_SH, as root) on a
// real VPP; each returns a transcript of the writes of its steps, which
// must be the same for both.
func runScenario(t *testing.T, scenario func(t *testing.T, env scenarioVPP) []string) {
	transcripts := map[string][]string{}
	for _, tc := range []struct {
		name  string
		start func(t *testing.T) scenarioVPP
	}{
		{"stand-in", simScenarioVPP},
		{"real VPP", realScenarioVPP},
	} {
		t.Run(tc.name, func(t *testing.T) {
			transcripts[tc.name] = scenario(t, tc.start(t))
			t.Logf("writes per step:\n%s", strings.Join(transcripts[tc.name], "\n"))
		})
	}
	sim, ranSim := transcripts["stand-in"]
	if real, ok := transcripts["real VPP"]; ok && ranSim && !t.Failed() {
		assert.Equal(t, sim, real, "the driver sends the same requests to the stand-in and to the real VPP")
	}
}

// scenarioDriver runs drivers (agent processes) against env, recording
// their requests.
type scenarioDriver struct {
	t   *testing.T
	env scenarioVPP
	rec *vppdrivertest.RequestRecorder
	d   *vppdriver.Driver
	// stop ends the driver that runs.
	stop func()
	// transcript collects the writes of each step.
	transcript []string
}

func newScenarioDriver(t *testing.T, env scenarioVPP) *scenarioDriver {
	s := &scenarioDriver{t: t, env: env, rec: &vppdrivertest.RequestRecorder{}}
	s.start()
	return s
}

// start runs a new driver (a new agent process) until the end of the test.
func (s *scenarioDriver) start() {
	cfg := testCfg()
	cfg.RequestTimeout = 10 * time.Second
	d, err := vppdriver.New(func() adapter.VppAPI { return s.rec.Wrap(s.env.newAdapter()) }, cfg)
	require.NoError(s.t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = d.Run(ctx) }()
	s.d, s.stop = d, func() { cancel(); <-done }
	s.t.Cleanup(s.stop)
	require.Eventually(s.t, func() bool { return d.Stats().Connected }, 30*time.Second, time.Millisecond)
}

// step commits values and waits until n keys are configured (and the
// driver idle); it returns the writes the step sent, in order, and adds
// them to the transcript (sorted: the order within a batch follows map
// order).
func (s *scenarioDriver) step(name string, kind controller.CommitKind, values controller.KeyValuePairs, n int) []string {
	s.t.Helper()
	s.rec.Take()
	commit(s.t, s.d, kind, values)
	waitConfigured(s.t, s.d, n)
	require.Eventually(s.t, s.d.Idle, 20*time.Second, time.Millisecond)
	w := vppdrivertest.Writes(s.rec.Take())
	sorted := slices.Sorted(slices.Values(w))
	s.transcript = append(s.transcript, name+": "+strings.Join(sorted, " "))
	return w
}

// restart restarts VPP and waits until the driver has reconnected and
// configured n keys again; the writes go to the transcript.
func (s *scenarioDriver) restart(n int) {
	s.t.Helper()
	connects := s.d.Stats().Connects
	s.rec.Take()
	s.env.restart()
	require.Eventually(s.t, func() bool { return s.d.Stats().Connects > connects }, 30*time.Second, time.Millisecond)
	waitConfigured(s.t, s.d, n)
	require.Eventually(s.t, s.d.Idle, 20*time.Second, time.Millisecond)
	w := vppdrivertest.Writes(s.rec.Take())
	s.transcript = append(s.transcript, "restart: "+strings.Join(slices.Sorted(slices.Values(w)), " "))
}

// dump runs one dump on a connection of its own.
func (s *scenarioDriver) dump(req api.Message) []api.Message {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := vppdrivertest.Dump(ctx, s.env.newAdapter(), req)
	require.NoError(s.t, err)
	return out
}

// acls returns VPP's ACLs by tag (index and rule count) and the ACL
// lists of the interfaces by interface tag ("in:[tags] out:[tags]").
func (s *scenarioDriver) acls() (map[string][2]uint32, map[string]string) {
	s.t.Helper()
	byIndex := map[uint32]string{}
	acls := map[string][2]uint32{}
	for _, m := range s.dump(&acl.ACLDump{ACLIndex: ^uint32(0)}) {
		r := m.(*acl.ACLDetails)
		byIndex[r.ACLIndex] = r.Tag
		acls[r.Tag] = [2]uint32{r.ACLIndex, uint32(len(r.R))}
	}
	tags := map[uint32]string{}
	for _, m := range s.dump(&interfaces.SwInterfaceDump{SwIfIndex: interface_types.InterfaceIndex(^uint32(0))}) {
		r := m.(*interfaces.SwInterfaceDetails)
		tags[uint32(r.SwIfIndex)] = r.Tag
	}
	lists := map[string]string{}
	for _, m := range s.dump(&acl.ACLInterfaceListDump{SwIfIndex: interface_types.InterfaceIndex(^uint32(0))}) {
		r := m.(*acl.ACLInterfaceListDetails)
		if len(r.Acls) == 0 {
			continue
		}
		var in, out []string
		for i, idx := range r.Acls {
			if i < int(r.NInput) {
				in = append(in, byIndex[idx])
			} else {
				out = append(out, byIndex[idx])
			}
		}
		lists[tags[uint32(r.SwIfIndex)]] = fmt.Sprintf("in:%v out:%v", in, out)
	}
	return acls, lists
}

// bigACL returns an ACL of n rules (IPv4 and IPv6, every action).
func bigACL(name string, n int) *vppmodel.ACL {
	a := &vppmodel.ACL{Name: name}
	for i := range n {
		r := &vppmodel.ACLRule{Action: vppmodel.ACLRule_Action(i % 3), Protocol: vppmodel.ProtoUDP,
			SrcPortLast: 65535, DstPortFirst: uint32(i % 1000), DstPortLast: uint32(i%1000 + 10)}
		if i%2 == 0 {
			r.SrcPrefix, r.DstPrefix = fmt.Sprintf("10.%d.%d.0/24", i/256%256, i%256), "0.0.0.0/0"
		} else {
			r.SrcPrefix, r.DstPrefix = fmt.Sprintf("fd00:%x:%x::/64", i/256%256, i%256), "::/0"
		}
		a.Rules = append(a.Rules, r)
	}
	return a
}

// TestACLScenario runs the driver's ACL work on the stand-in and on a
// real VPP 26.06 (with VPP_SH, as root) and checks that both get the same
// requests: ACLs (one of 5000 rules) applied to two interfaces; a resync
// and a new driver on the populated VPP write nothing (VPP echoes the
// rules as the driver compares them); an ACL changed in place keeps its
// index; an ACL renamed in a pod's list is three requests in order (the
// new ACL, the list, the old ACL's deletion), none failing; an interface
// deleted with its list is one request; after a VPP restart everything is
// made again; a resync to nothing leaves no ACL.
func TestACLScenario(t *testing.T) {
	runScenario(t, testACLScenario)
}

func testACLScenario(t *testing.T, env scenarioVPP) []string {
	s := newScenarioDriver(t, env)
	pol1 := aclOf("pol-1", aclRule("10.1.0.0/16", "0.0.0.0/0", 80), aclRule("fd00:1::/64", "::/0", 80))
	reflect := aclOf("reflect", &vppmodel.ACLRule{Action: vppmodel.ACLRule_PERMIT_REFLECT, SrcPrefix: "0.0.0.0/0", DstPrefix: "0.0.0.0/0",
		SrcPortLast: 65535, DstPortLast: 65535}, &vppmodel.ACLRule{Action: vppmodel.ACLRule_PERMIT_REFLECT, SrcPrefix: "::/0",
		DstPrefix: "::/0", SrcPortLast: 65535, DstPortLast: 65535})
	big := bigACL("big", 5000)
	state := kv(t, loop("pod-a", true, 0, "10.1.1.1/24"), loop("pod-b", true, 0, "10.1.2.1/24"), pol1, reflect, big,
		aclList("pod-a", []string{"reflect"}, []string{"pol-1"}),
		aclList("pod-b", []string{"reflect"}, []string{"pol-1", "big"}))
	s.step("create", controller.CommitResync, state, len(state))
	acls, lists := s.acls()
	require.Len(t, acls, 3)
	assert.Equal(t, uint32(5000), acls["vsk:big"][1])
	assert.Equal(t, map[string]string{
		"vsk:pod-a": "in:[vsk:reflect] out:[vsk:pol-1]",
		"vsk:pod-b": "in:[vsk:reflect] out:[vsk:pol-1 vsk:big]",
	}, lists)

	assert.Empty(t, s.step("resync", controller.CommitResync, state, len(state)), "a resync of an unchanged VPP")
	s.stop()
	s.start()
	assert.Empty(t, s.step("new driver", controller.CommitResync, state, len(state)), "a new driver on a populated VPP")

	pol1 = aclOf("pol-1", aclRule("10.1.0.0/16", "0.0.0.0/0", 8080))
	state[vppmodel.ACLKey("pol-1")] = pol1
	assert.Equal(t, []string{"acl_add_replace"}, s.step("in place", controller.CommitUpdate, kv(t, pol1), len(state)))
	after, _ := s.acls()
	assert.Equal(t, acls["vsk:pol-1"][0], after["vsk:pol-1"][0], "the same index")
	assert.Equal(t, uint32(1), after["vsk:pol-1"][1])

	listB := aclList("pod-b", []string{"reflect"}, []string{"big"})
	state[vppmodel.ACLInterfaceKey("pod-b")] = listB
	assert.Equal(t, []string{"acl_interface_set_acl_list"}, s.step("list", controller.CommitUpdate, kv(t, listB), len(state)))

	failed := s.d.Stats().FailedAttempts
	pol2, listA := aclOf("pol-2", aclRule("10.2.0.0/16", "0.0.0.0/0", 8080)), aclList("pod-a", []string{"reflect"}, []string{"pol-2"})
	rename := kv(t, pol2, listA)
	rename[vppmodel.ACLKey("pol-1")] = nil
	delete(state, vppmodel.ACLKey("pol-1"))
	state[vppmodel.ACLKey("pol-2")], state[vppmodel.ACLInterfaceKey("pod-a")] = pol2, listA
	assert.Equal(t, []string{"acl_add_replace", "acl_interface_set_acl_list", "acl_del"},
		s.step("rename", controller.CommitUpdate, rename, len(state)), "in this order")
	assert.Equal(t, failed, s.d.Stats().FailedAttempts, "no failed request")
	_, lists = s.acls()
	assert.Equal(t, "in:[vsk:reflect] out:[vsk:pol-2]", lists["vsk:pod-a"])

	gone := controller.KeyValuePairs{vppmodel.InterfaceKey("pod-b"): nil, vppmodel.ACLInterfaceKey("pod-b"): nil}
	delete(state, vppmodel.InterfaceKey("pod-b"))
	delete(state, vppmodel.ACLInterfaceKey("pod-b"))
	assert.Equal(t, []string{"delete_loopback"}, s.step("interface deleted", controller.CommitUpdate, gone, len(state)))

	s.restart(len(state))
	acls, lists = s.acls()
	assert.Len(t, acls, 3)
	assert.Equal(t, map[string]string{"vsk:pod-a": "in:[vsk:reflect] out:[vsk:pol-2]"}, lists)

	s.step("cleanup", controller.CommitResync, controller.KeyValuePairs{}, 0)
	acls, lists = s.acls()
	assert.Empty(t, acls)
	assert.Empty(t, lists)
	require.NoError(t, s.d.CheckInvariants())
	return s.transcript
}
