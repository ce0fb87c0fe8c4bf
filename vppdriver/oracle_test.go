package vppdriver_test

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.fd.io/govpp/adapter"
	"go.fd.io/govpp/api"
	interfaces "go.fd.io/govpp/binapi/interface"
	"google.golang.org/protobuf/proto"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/internal/testseed"
	"github.com/vswitchkit/vswitchkit/vppdriver"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppdrivertest"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppmodel"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppsim"
)

// modelKeys is a small key universe with dependencies between the keys:
// tables, interfaces in tables, routes through interfaces in tables, the
// NAT44 plugin, NAT44 features of interfaces and load-balanced mappings,
// ACLs and the ACL lists of interfaces, cnat translations (some of them on
// a SNAT address), the cnat SNAT entry and cnat on interfaces.
type modelKeys struct {
	r *rand.Rand
}

var (
	modelIfaces = []string{"a", "b", "c"}
	modelDsts   = []string{"10.10.0.0/16", "10.11.0.0/16", "10.12.0.0/16"}
	modelExts   = []string{"192.0.2.1", "192.0.2.2"}
	modelACLs   = []string{"x", "y", "z"}
	modelVIPs   = []string{"192.0.2.1", "10.96.0.1", "fd00:96::1"} // the first two are SNAT addresses too
)

// random returns a random value for a random key: valid (most of the
// time) or invalid, or nil (delete).
func (m modelKeys) random() (string, proto.Message) {
	r := m.r
	var v proto.Message
	switch r.IntN(11) {
	case 0:
		v = &vppmodel.VrfTable{Id: uint32(1 + r.IntN(2)), Label: fmt.Sprint("t", r.IntN(2))}
	case 1:
		i := r.IntN(len(modelIfaces))
		addr := fmt.Sprintf("10.%d.%d.1/24", i, r.IntN(2))
		if r.IntN(8) == 0 {
			addr = "10.0.0.1/40" // invalid
		}
		v = loop(modelIfaces[i], r.IntN(2) == 0, uint32(r.IntN(3)), addr)
	case 2:
		p := via(modelIfaces[r.IntN(len(modelIfaces))], fmt.Sprintf("10.99.0.%d", 1+r.IntN(3)))
		if r.IntN(8) == 0 {
			p.NextHop = "10.99.0.x" // invalid
		}
		v = route(uint32(r.IntN(2)), modelDsts[r.IntN(len(modelDsts))], p)
	case 3:
		v = &vppmodel.Nat44Global{Sessions: uint32(1000 * (1 + r.IntN(2)))}
	case 4:
		in := r.IntN(2) == 0
		v = &vppmodel.Nat44Interface{Interface: modelIfaces[r.IntN(len(modelIfaces))], Inside: in, Outside: !in || r.IntN(2) == 0}
	case 5:
		b := []*vppmodel.Nat44Backend{{Ip: "10.1.0.10", Port: 80, Probability: 50}, {Ip: fmt.Sprint("10.1.0.", 11+r.IntN(3)), Port: 80, Probability: uint32(10 + r.IntN(40))}}
		v = &vppmodel.Nat44LbStaticMapping{Protocol: vppmodel.Nat44Protocol_TCP, ExternalIp: modelExts[r.IntN(len(modelExts))],
			ExternalPort: 80, Out2InOnly: true, Backends: b}
	case 6:
		a := &vppmodel.ACL{Name: modelACLs[r.IntN(len(modelACLs))]}
		for range r.IntN(3) {
			src := fmt.Sprintf("10.%d.0.0/16", r.IntN(3))
			if r.IntN(10) == 0 {
				src = "10.0.0.1/16" // invalid
			}
			a.Rules = append(a.Rules, &vppmodel.ACLRule{Action: vppmodel.ACLRule_Action(r.IntN(3)), SrcPrefix: src, DstPrefix: "0.0.0.0/0",
				Protocol: vppmodel.ProtoTCP, DstPortFirst: 80, DstPortLast: uint32(80 + r.IntN(2))})
		}
		v = a
	case 7:
		l := &vppmodel.ACLInterface{Interface: modelIfaces[r.IntN(len(modelIfaces))]}
		for _, n := range r.Perm(len(modelACLs))[:r.IntN(len(modelACLs)+1)] {
			if r.IntN(2) == 0 {
				l.Input = append(l.Input, modelACLs[n])
			} else {
				l.Output = append(l.Output, modelACLs[n])
			}
		}
		v = l
	case 8:
		vip := modelVIPs[r.IntN(len(modelVIPs))]
		t := &vppmodel.CnatTranslation{Vip: vip, Port: 80, Protocol: vppmodel.ProtoTCP, LbType: vppmodel.CnatTranslation_LbType(r.IntN(2)),
			RealIp: r.IntN(2) == 0, AllocPort: r.IntN(2) == 0, FlowHashConfig: uint32(r.IntN(2)) * vppmodel.CnatFlowHashSrcIP}
		for _, b := range r.Perm(3)[:r.IntN(3)] {
			t.Paths = append(t.Paths, &vppmodel.CnatPath{DstIp: fmt.Sprint("10.1.0.", 11+b), DstPort: 8080})
		}
		v = t // without paths: invalid
	case 9:
		sn := &vppmodel.CnatSnat{Policy: vppmodel.CnatSnat_Policy(2 * r.IntN(2)), NoClient: r.IntN(2) == 0}
		if r.IntN(3) != 0 {
			sn.Ip4 = modelVIPs[r.IntN(2)]
		}
		if r.IntN(2) == 0 {
			sn.Ip6 = "2001:db8::1"
		}
		for _, p := range r.Perm(3)[:r.IntN(3)] {
			sn.ExcludedPrefixes = append(sn.ExcludedPrefixes, fmt.Sprintf("10.%d.0.0/16", p))
		}
		v = sn // without addresses: invalid
	case 10:
		v = &vppmodel.CnatInterface{Interface: modelIfaces[r.IntN(len(modelIfaces))], Feature: r.IntN(2) == 0,
			SnatPod: r.IntN(2) == 0, SnatHost: r.IntN(3) == 0, SnatV4: r.IntN(3) == 0, SnatV6: r.IntN(4) == 0} // with nothing: invalid
	}
	key, err := vppmodel.KeyOf(v)
	if err != nil { // an invalid value: store it under the key it would have
		key = invalidKey(v)
	}
	if r.IntN(5) == 0 {
		return key, nil
	}
	return key, v
}

func invalidKey(v proto.Message) string {
	switch m := v.(type) {
	case *vppmodel.Interface:
		return vppmodel.InterfaceKey(m.Name)
	case *vppmodel.Route:
		return vppmodel.RouteKey(m.Vrf, netip.MustParsePrefix(m.DstNetwork))
	case *vppmodel.ACL:
		return vppmodel.ACLKey(m.Name)
	case *vppmodel.CnatTranslation:
		return vppmodel.CnatTranslationKey(m.Protocol, netip.MustParseAddr(m.Vip), m.Port)
	case *vppmodel.CnatSnat:
		return vppmodel.CnatSnatKey
	case *vppmodel.CnatInterface:
		return vppmodel.CnatInterfaceKey(m.Interface)
	}
	panic(fmt.Sprintf("no invalid %T", v))
}

// modelDeps returns the dependencies of a valid value (the oracle's own
// copy of the rules).
func modelDeps(v proto.Message) []string {
	var deps []string
	switch m := v.(type) {
	case *vppmodel.Interface:
		if m.Vrf != 0 {
			deps = append(deps, vppmodel.VrfTableKey(vppmodel.VrfTable_IPV4, m.Vrf))
		}
	case *vppmodel.Route:
		if m.Vrf != 0 {
			deps = append(deps, vppmodel.VrfTableKey(vppmodel.VrfTable_IPV4, m.Vrf))
		}
		for _, p := range m.Paths {
			deps = append(deps, vppmodel.InterfaceKey(p.OutgoingInterface))
		}
	case *vppmodel.Nat44Interface:
		deps = append(deps, vppmodel.Nat44GlobalKey, vppmodel.InterfaceKey(m.Interface))
	case *vppmodel.Nat44LbStaticMapping:
		deps = append(deps, vppmodel.Nat44GlobalKey)
	case *vppmodel.CnatInterface:
		deps = append(deps, vppmodel.InterfaceKey(m.Interface))
		if m.SnatPod || m.SnatHost || m.SnatV4 || m.SnatV6 {
			deps = append(deps, vppmodel.CnatSnatKey)
		}
	case *vppmodel.ACLInterface:
		deps = append(deps, vppmodel.InterfaceKey(m.Interface))
		for _, n := range m.ACLNames() {
			deps = append(deps, vppmodel.ACLKey(n))
		}
	}
	return deps
}

// oracle returns the state every desired key must reach: invalid values
// Failed, keys whose dependencies are all configured Configured (a
// fixpoint), the others Pending.
func oracle(desired map[string]proto.Message) map[string]vppdriver.State {
	out := map[string]vppdriver.State{}
	for k, v := range desired {
		if vppmodel.CheckKey(k, v) != nil {
			out[k] = vppdriver.StateFailed
		} else {
			out[k] = vppdriver.StatePending
		}
	}
	for changed := true; changed; {
		changed = false
		for k, v := range desired {
			if out[k] != vppdriver.StatePending {
				continue
			}
			ok := true
			for _, dep := range modelDeps(v) {
				ok = ok && out[dep] == vppdriver.StateConfigured
			}
			if ok {
				out[k] = vppdriver.StateConfigured
				changed = true
			}
		}
	}
	return out
}

// TestModel applies random changes (valid, invalid, deletes; update and
// resync commits) and checks after each step that the incremental driver
// reaches the oracle's state, that VPP holds exactly that (a resync of the
// same state reads everything back as it is: no VPP writes), and that the
// driver's indexes and published statuses are consistent. It logs its
// seed; -args -seed=N replays a run.
func TestModel(t *testing.T) {
	r := rand.New(rand.NewPCG(testseed.Clock(t), 1))
	keys := modelKeys{r}
	vpp := vppsim.New(vppsim.Config{})
	d := startDriver(t, vpp, testCfg())
	require.Eventually(t, d.Connected, 10*time.Second, time.Millisecond)
	desired := map[string]proto.Message{}
	steps := 150
	if testing.Short() {
		steps = 30
	}
	for step := range steps {
		values := controller.KeyValuePairs{}
		for range 1 + r.IntN(4) {
			k, v := keys.random()
			values[k] = v
			if v == nil {
				delete(desired, k)
			} else {
				desired[k] = v
			}
		}
		kind := controller.CommitUpdate
		if r.IntN(10) == 0 {
			kind = controller.CommitResync
			values = controller.KeyValuePairs{}
			maps.Copy(values, desired)
		}
		_ = commitErr(t, d, kind, values)
		want := oracle(desired)
		// No failures are injected: the commit's own pass converges (no
		// second pass, no waiting).
		func() {
			c := t
			got := map[string]vppdriver.State{}
			applied := d.Applied()
			for k, s := range d.Statuses() {
				got[k] = s.State
				// A key applied earlier stays configured while VPP holds
				// its dependencies, even if their own new values wait
				// (an in-place change of an interface waiting for its
				// new table keeps the old interface and what uses it).
				if want[k] == vppdriver.StatePending && s.State == vppdriver.StateConfigured {
					for _, dep := range modelDeps(desired[k]) {
						require.Contains(c, applied, dep, "%s is configured, VPP lacks %s", k, dep)
					}
					got[k] = vppdriver.StatePending
				}
			}
			require.Equal(c, want, got, "step %d: %v", step, slices.Sorted(maps.Keys(values)))
		}()
		require.NoError(t, d.CheckInvariants(), "step %d", step)
		for k, s := range d.Statuses() {
			if s.State == vppdriver.StatePending {
				assert.NotEmpty(t, s.PendingOn, "step %d: %s waits for nothing", step, k)
			}
		}

		if step%10 == 9 {
			rec := record(vpp)
			all := controller.KeyValuePairs{}
			maps.Copy(all, desired)
			_ = commitErr(t, d, controller.CommitResync, all)
			vpp.SetInterceptor(nil)
			require.Empty(t, writes(rec.take()), "step %d: a resync of the same state changed VPP", step)
			require.NoError(t, d.CheckInvariants(), "step %d", step)
		}
	}
}

// writes filters the recorded requests down to the ones that change VPP.
func writes(reqs []string) []string {
	return slices.DeleteFunc(reqs, vppdrivertest.ReadOnlyMessage)
}

// TestModelFaults is TestModel with VPP failing requests at random
// (retriable and permanent retvals) and commits whose caller gives up
// midway (half-made interfaces), in fake time so that retries run: after
// every step the driver's states, indexes and statuses are consistent.
// Then the faults stop, the driver heals what it can (its retries), and a
// new driver (an agent restart) takes over the VPP as the faults left it:
// it reaches the oracle's state, and VPP holds exactly that.
//
// The seed fixes the commits and the stream of fault decisions; which
// request a decision hits also depends on the driver's order within a
// batch of requests, which follows Go's map order: rerun a seed with
// -count to reproduce a failure.
//
// Making an interface and tagging it never fail here, and the caller
// never gives up between the two: an interface VPP made but the driver
// did not tag (a loopback gets its tag in a second request) is invisible
// to a readback, so a resync before the retry that
// deletes it leaves it behind (a known limit, see the package doc).
func TestModelFaults(t *testing.T) {
	seed := testseed.Clock(t)
	synctest.Test(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(seed, 2))
		keys := modelKeys{r}
		vpp := vppsim.New(vppsim.Config{})
		cfg := testCfg()
		cfg.HealthInterval = time.Hour
		first, err := vppdriver.New(func() adapter.VppAPI { return vpp.NewAdapter() }, cfg)
		require.NoError(t, err)
		ctx, stop := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- first.Run(ctx) }()
		synctest.Wait()
		require.True(t, first.Connected())

		var mu sync.Mutex
		var giveUp context.CancelFunc // cancels the commit in progress
		faults := rand.New(rand.NewPCG(seed, 3))
		vpp.SetInterceptor(func(req api.Message) (int32, bool) {
			if vppdrivertest.ReadOnlyMessage(req.GetMessageName()) {
				return 0, false
			}
			mu.Lock()
			defer mu.Unlock()
			if createsOrTagsInterface(req) {
				return 0, false // see below
			}
			switch n := faults.IntN(100); {
			case n < 8:
				return -1, true // UNSPECIFIED: retried
			case n < 10:
				return -7, true // INVALID_VALUE: permanent
			case n < 12 && giveUp != nil:
				giveUp()
			}
			return 0, false
		})
		desired := map[string]proto.Message{}
		steps := 150
		if testing.Short() {
			steps = 30
		}
		for step := range steps {
			values := controller.KeyValuePairs{}
			for range 1 + r.IntN(4) {
				k, v := keys.random()
				values[k] = v
				if v == nil {
					delete(desired, k)
				} else {
					desired[k] = v
				}
			}
			kind := controller.CommitUpdate
			if r.IntN(10) == 0 {
				kind = controller.CommitResync
				values = controller.KeyValuePairs{}
				maps.Copy(values, desired)
			}
			cctx, cancel := context.WithCancel(context.Background())
			mu.Lock()
			giveUp = cancel
			mu.Unlock()
			_, _ = first.Commit(cctx, &controller.Commit{Kind: kind, Values: values})
			mu.Lock()
			giveUp = nil
			mu.Unlock()
			cancel()
			time.Sleep(time.Duration(r.IntN(300)) * time.Millisecond) // some retries run
			synctest.Wait()
			require.NoError(t, first.CheckInvariants(), "step %d", step)
		}
		vpp.SetInterceptor(nil)
		time.Sleep(time.Second) // the retries that are due run, now without faults
		synctest.Wait()
		require.NoError(t, first.CheckInvariants())
		st := first.Stats()
		t.Logf("%d failed attempts, %d keys failed at the end", st.FailedAttempts, st.Failed)
		require.NotZero(t, st.FailedAttempts)
		stop()
		require.ErrorIs(t, <-done, context.Canceled)

		d := startDriver(t, vpp, cfg)
		all := controller.KeyValuePairs{}
		maps.Copy(all, desired)
		_ = commitErr(t, d, controller.CommitResync, all)
		synctest.Wait()
		require.NoError(t, d.CheckInvariants())
		got := map[string]vppdriver.State{}
		for k, s := range d.Statuses() {
			got[k] = s.State
		}
		want := oracle(desired)
		for k, s := range want {
			if s == vppdriver.StatePending && got[k] == vppdriver.StateConfigured {
				got[k] = vppdriver.StatePending // applied earlier, VPP holds its dependencies (see TestModel)
			}
		}
		require.Equal(t, want, got)
		rec := record(vpp)
		_ = commitErr(t, d, controller.CommitResync, all)
		require.Empty(t, writes(rec.take()), "a resync of the same state changed VPP")
	})
}

// createsOrTagsInterface tells whether req makes or tags an interface
// (see TestModelFaults).
func createsOrTagsInterface(req api.Message) bool {
	switch req.(type) {
	case *interfaces.CreateLoopback, *interfaces.SwInterfaceTagAddDel:
		return true
	}
	return false
}
