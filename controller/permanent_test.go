package controller_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/controllertest"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

var errInvalid = errors.New("invalid value")

// rejectBad is a RejectKey function: values starting with "bad" are invalid.
func rejectBad(_ string, v proto.Message) error {
	if s, ok := v.(*wrapperspb.StringValue); ok && strings.HasPrefix(s.GetValue(), "bad") {
		return errInvalid
	}
	return nil
}

// TestRejectedKeysKeepTheLoopRunning: with the default configuration, a
// southbound that rejects one invalid value in every commit (applying the
// rest) used to kill the loop with ErrHealingFailed after about 31 s. Now the
// rejections are reported and nothing is healed.
func TestRejectedKeysKeepTheLoopRunning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sb := &controllertest.Southbound{RejectKey: rejectBad}
		log := &callLog{}
		l := newLoop(t, []controller.EventHandler{handler("a", log, nil)}, sb, controller.Config{})
		_, runDone := run(t, l)
		start := time.Now()

		db := controller.NewDBResync()
		db.ExternalConfig["vpp/ok/0"] = str("ok")
		db.ExternalConfig["vpp/bad/0"] = str("bad 0")
		require.NoError(t, l.PushEvent(db))

		// One external change every 10 s for 10 × MaxHealingDelay (default
		// 1m), each with one invalid value next to a valid one. Source "user"
		// sorts after "remotedb", so its values win.
		const maxHealingDelay = time.Minute
		n := int(10 * maxHealingDelay / (10 * time.Second))
		for i := 1; i <= n; i++ {
			time.Sleep(10 * time.Second)
			select {
			case err := <-runDone:
				t.Fatalf("Run stopped after %v: %v", time.Since(start), err)
			default:
			}
			ch := controller.NewExternalConfigChange("user", true)
			ch.UpdatedKVs[fmt.Sprintf("vpp/ok/%d", i)] = str("ok")
			ch.UpdatedKVs[fmt.Sprintf("vpp/bad/%d", i)] = str(fmt.Sprintf("bad %d", i))
			require.NoError(t, l.PushEvent(ch))
			err := ch.Wait()
			require.ErrorIs(t, err, errInvalid, "Done reports the rejection")
			require.True(t, controller.IsPermanent(err))
		}
		synctest.Wait()
		require.GreaterOrEqual(t, time.Since(start), 10*maxHealingDelay)

		// Every commit applied the valid keys; no healing was scheduled.
		state := values(sb.State())
		for i := 0; i <= n; i++ {
			assert.Equal(t, "ok", state[fmt.Sprintf("vpp/ok/%d", i)])
			assert.NotContains(t, state, fmt.Sprintf("vpp/bad/%d", i))
		}
		st := l.Stats()
		assert.Zero(t, st.HealingScheduled)
		assert.Zero(t, st.HealingFailed)
		assert.EqualValues(t, n+1, st.Commits)
		for _, r := range l.History().Last(1000) {
			assert.NotEqual(t, "Healing Resync", r.Name)
		}

		// The rejected keys are reported.
		assert.Equal(t, n+1, st.RejectedKeys)
		assert.EqualValues(t, n+1, st.PermanentErrors, "one rejection per commit")
		rejected := l.RejectedKeys()
		require.Len(t, rejected, n+1)
		for i := 0; i <= n; i++ {
			assert.ErrorIs(t, rejected[fmt.Sprintf("vpp/bad/%d", i)], errInvalid)
		}
		herr := l.Healthy()
		require.ErrorIs(t, herr, controller.ErrDegraded)
		var ke *controller.KeyError
		require.ErrorAs(t, herr, &ke)
		assert.Equal(t, "vpp/bad/0", ke.Key, "the first rejected key in key order")

		// A later change fixes every value: nothing is rejected any more.
		fix := controller.NewExternalConfigChange("user", true)
		for i := 0; i <= n; i++ {
			fix.UpdatedKVs[fmt.Sprintf("vpp/bad/%d", i)] = str("fixed")
		}
		require.NoError(t, l.PushEvent(fix))
		require.NoError(t, fix.Wait())
		assert.Empty(t, l.RejectedKeys())
		assert.Zero(t, l.Stats().RejectedKeys)
		assert.NoError(t, l.Healthy())
		assert.Equal(t, "fixed", values(sb.State())["vpp/bad/3"])
		assert.Zero(t, l.Stats().HealingScheduled)
	})
}

// TestMixedCommitErrorHealsTheTransientPart: a commit that rejects a key and
// fails transiently is healed; the healing resync that only rejects the key
// again counts as a success.
func TestMixedCommitErrorHealsTheTransientPart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		errTimeout := errors.New("timeout")
		sb := &controllertest.Southbound{RejectKey: rejectBad}
		flaky := 1 // commits that also fail transiently
		mixed := controller.SouthboundFunc(func(ctx context.Context, c *controller.Commit) (uint64, error) {
			seq, err := sb.Commit(ctx, c)
			if flaky > 0 {
				flaky--
				err = errors.Join(err, errTimeout)
			}
			return seq, err
		})
		log := &callLog{}
		l := newLoop(t, []controller.EventHandler{handler("a", log, nil)}, mixed,
			controller.Config{HealingDelay: time.Second, MaxHealingAttempts: 1})
		_, runDone := run(t, l)
		db := controller.NewDBResync()
		db.ExternalConfig["vpp/bad"] = str("bad")
		db.ExternalConfig["vpp/ok"] = str("ok")
		require.NoError(t, l.PushEvent(db))
		synctest.Wait()
		st := l.Stats()
		require.EqualValues(t, 1, st.HealingScheduled, "the transient part is healed")

		time.Sleep(time.Hour)
		synctest.Wait()
		select {
		case err := <-runDone:
			t.Fatalf("Run stopped: %v", err)
		default:
		}
		st = l.Stats()
		assert.EqualValues(t, 1, st.HealingScheduled, "a healing resync that only rejects keys is not healed again")
		assert.Zero(t, st.HealingFailed)
		assert.EqualValues(t, 2, st.Resyncs)
		assert.Equal(t, "ok", values(sb.State())["vpp/ok"])
		assert.Equal(t, []string{"vpp/bad"}, keysOf(l.RejectedKeys()))
	})
}

// TestPermanentSouthboundError: a southbound's permanent error that is not
// about a key (say, the data plane lacks an API) is reported until a resync
// commit comes back without it; it is never healed.
func TestPermanentSouthboundError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		errIncompatible := errors.New("VPP lacks the NAT44 messages")
		incompatible := true
		sb := &controllertest.Southbound{Fail: func(_ int, c *controller.Commit) error {
			if incompatible {
				return controller.NewPermanentError(errIncompatible)
			}
			return nil
		}}
		log := &callLog{}
		l := newLoop(t, []controller.EventHandler{handler("a", log, nil)}, sb, controller.Config{})
		_, runDone := run(t, l)
		require.NoError(t, l.PushEvent(controller.NewDBResync()))
		ev := newUpdate("ev", controller.BestEffort, controller.Forward)
		require.NoError(t, l.PushEvent(ev))
		synctest.Wait()
		require.ErrorIs(t, ev.result(t), errIncompatible)
		time.Sleep(time.Hour)
		synctest.Wait()
		select {
		case err := <-runDone:
			t.Fatalf("Run stopped: %v", err)
		default:
		}
		st := l.Stats()
		assert.Zero(t, st.HealingScheduled)
		assert.EqualValues(t, 2, st.PermanentErrors)
		assert.Zero(t, st.RejectedKeys)
		herr := l.Healthy()
		assert.ErrorIs(t, herr, controller.ErrDegraded)
		assert.ErrorIs(t, herr, errIncompatible)

		// An update commit that succeeds does not prove the condition ended.
		incompatible = false
		ev2 := newUpdate("ev2", controller.BestEffort, controller.Forward)
		require.NoError(t, l.PushEvent(ev2))
		synctest.Wait()
		require.NoError(t, ev2.result(t))
		assert.ErrorIs(t, l.Healthy(), errIncompatible)

		// A resync commit without it does.
		rs := controller.NewExternalConfigResync("user", true)
		require.NoError(t, l.PushEvent(rs))
		require.NoError(t, rs.Wait())
		assert.NoError(t, l.Healthy())
	})
}

// TestPermanentHandlerErrors: a handler's permanent error is recorded, not
// healed. A KeyError about an input key (here the Kubernetes key of the
// change) is tracked per key like the southbound's; another permanent error
// is outstanding until that handler's next clean Resync.
func TestPermanentHandlerErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		errBroken := errors.New("feature unavailable")
		broken := true
		h := &controller.HandlerFuncs{Name: "h",
			ResyncFunc: func(controller.Event, controller.KubeStateData, int, controller.ResyncOperations) error {
				if broken {
					return controller.NewPermanentError(errBroken)
				}
				return nil
			},
			UpdateFunc: func(ev controller.Event, txn controller.UpdateOperations) (string, error) {
				ch, ok := ev.(*controller.KubeStateChange)
				if !ok {
					return "", nil
				}
				if v, ok := ch.NewValue.(*wrapperspb.StringValue); ok && strings.HasPrefix(v.GetValue(), "bad") {
					return "", &controller.KeyError{Key: ch.Key, Err: errInvalid}
				}
				txn.Put("vpp/"+ch.Key, ch.NewValue)
				return "", nil
			},
		}
		sb := &controllertest.Southbound{}
		l := newLoop(t, []controller.EventHandler{h}, sb, controller.Config{})
		run(t, l)
		require.NoError(t, l.PushEvent(controller.NewDBResync()))
		require.NoError(t, l.PushEvent(&controller.KubeStateChange{Resource: "thing", Key: "k8s/thing/a", NewValue: wrapperspb.String("bad a")}))
		require.NoError(t, l.PushEvent(&controller.KubeStateChange{Resource: "thing", Key: "k8s/thing/b", NewValue: wrapperspb.String("bad b")}))
		synctest.Wait()
		time.Sleep(time.Hour)
		synctest.Wait()
		st := l.Stats()
		assert.Zero(t, st.HealingScheduled)
		assert.EqualValues(t, 3, st.PermanentErrors)
		assert.Equal(t, []string{"k8s/thing/a", "k8s/thing/b"}, keysOf(l.RejectedKeys()))
		herr := l.Healthy()
		assert.ErrorIs(t, herr, controller.ErrDegraded)
		assert.ErrorIs(t, herr, errBroken)

		// The input is fixed: its key is no longer rejected.
		require.NoError(t, l.PushEvent(&controller.KubeStateChange{Resource: "thing", Key: "k8s/thing/a",
			PrevValue: wrapperspb.String("bad a"), NewValue: wrapperspb.String("good")}))
		synctest.Wait()
		assert.Equal(t, []string{"k8s/thing/b"}, keysOf(l.RejectedKeys()))
		assert.Equal(t, "good", values(sb.State())["vpp/k8s/thing/a"])

		// A resync replaces the rejected keys with its own (none: Resync
		// does not look at them here) and clears the handler's error once
		// its Resync succeeds.
		broken = false
		rs := controller.NewExternalConfigResync("user", true)
		require.NoError(t, l.PushEvent(rs))
		require.NoError(t, rs.Wait())
		assert.Empty(t, l.RejectedKeys())
		assert.NoError(t, l.Healthy())
	})
}

func keysOf(m map[string]error) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
