package controllertest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/controllertest"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func TestTxn(t *testing.T) {
	var txn controllertest.Txn
	txn.Put("a", wrapperspb.String("1"))
	txn.Put("b", wrapperspb.String("2"))
	txn.Delete("b")
	require.Equal(t, "1", txn.Get("a").(*wrapperspb.StringValue).GetValue())
	require.Nil(t, txn.Get("b"))
	require.Equal(t, []string{"a", "b"}, txn.Keys())
	require.Len(t, txn.Values(), 2)
	require.Panics(t, func() { txn.Put("c", nil) })
	seq, err := txn.Commit(context.Background())
	require.NoError(t, err)
	require.EqualValues(t, 1, seq)
	txn.Reset()
	require.Empty(t, txn.Keys())

	// Follow-ups pushed by a handler under test are recorded.
	ev := controller.NewExternalConfigChange("src", false)
	require.NoError(t, controller.PushFollowUp(&txn, ev))
	require.ErrorIs(t, controller.PushFollowUp(&txn, controller.NewShutdownEvent()), controller.ErrBlockingFollowUp)
	require.Equal(t, []controller.Event{ev}, txn.FollowUps())
	txn.Reset()
	require.Empty(t, txn.FollowUps())
}

func TestEventRecorder(t *testing.T) {
	r := &controllertest.EventRecorder{AutoDone: true}
	ev := controller.NewExternalConfigChange("src", true)
	require.NoError(t, r.PushEvent(ev))
	require.NoError(t, ev.Wait())

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	go func() { _ = r.PushEvent(controller.NewDBResync()) }()
	evs, err := r.WaitFor(ctx, 2)
	require.NoError(t, err)
	require.Len(t, evs, 2)

	short, cancel2 := context.WithCancel(context.Background())
	cancel2()
	_, err = r.WaitFor(short, 3)
	require.ErrorIs(t, err, context.Canceled)

	r.PushErr = func(controller.Event) error { return controller.ErrQueueFull }
	require.ErrorIs(t, r.PushEvent(controller.NewDBResync()), controller.ErrQueueFull)
	require.Equal(t, 2, r.Len())
}

func TestSouthbound(t *testing.T) {
	boom := errors.New("boom")
	sb := &controllertest.Southbound{Fail: func(n int, _ *controller.Commit) error {
		if n == 3 {
			return boom
		}
		return nil
	}}
	ctx := context.Background()
	ev := controller.NewDBResync()
	_, err := sb.Commit(ctx, &controller.Commit{Kind: controller.CommitResync, Event: ev,
		Values: controller.KeyValuePairs{"a": wrapperspb.String("1"), "b": wrapperspb.String("2")}})
	require.NoError(t, err)
	seq, err := sb.Commit(ctx, &controller.Commit{Kind: controller.CommitUpdate, Event: ev,
		Values: controller.KeyValuePairs{"a": nil, "c": wrapperspb.String("3")}})
	require.NoError(t, err)
	require.EqualValues(t, 2, seq)
	_, err = sb.Commit(ctx, &controller.Commit{Kind: controller.CommitUpdate, Event: ev,
		Values: controller.KeyValuePairs{"b": nil}})
	require.ErrorIs(t, err, boom)
	_, err = sb.Commit(ctx, &controller.Commit{Kind: controller.CommitReapply, Event: ev})
	require.NoError(t, err)

	require.Len(t, sb.State(), 2, "the failed commit changed nothing")
	require.Contains(t, sb.State(), "b")
	require.Contains(t, sb.State(), "c")
	require.Equal(t, 1, sb.Reapplies())
	cs := sb.Commits()
	require.Len(t, cs, 4)
	require.ErrorIs(t, cs[2].Err, boom)
	require.Zero(t, cs[2].Seq)
}

func TestSouthboundRejectKey(t *testing.T) {
	bad := errors.New("invalid value")
	sb := &controllertest.Southbound{RejectKey: func(key string, v proto.Message) error {
		if s, ok := v.(*wrapperspb.StringValue); ok && s.GetValue() == "bad" {
			return bad
		}
		if key == "gone" {
			return controller.NewFatalError(errors.New("data plane gone"))
		}
		return nil
	}}
	ctx := context.Background()
	ev := controller.NewDBResync()
	str := wrapperspb.String
	for _, tc := range []struct {
		name      string
		kind      controller.CommitKind
		values    controller.KeyValuePairs
		wantKeys  []string // rejected, in order
		wantFatal bool
		wantState map[string]string
	}{
		{name: "resync applies the rest", kind: controller.CommitResync,
			values:   controller.KeyValuePairs{"a": str("1"), "b": str("bad"), "c": str("bad"), "d": str("4")},
			wantKeys: []string{"b", "c"}, wantState: map[string]string{"a": "1", "d": "4"}},
		{name: "update: a rejected key keeps its old value", kind: controller.CommitUpdate,
			values:   controller.KeyValuePairs{"a": str("bad"), "b": str("2"), "d": nil},
			wantKeys: []string{"a"}, wantState: map[string]string{"a": "1", "b": "2"}},
		{name: "resync: a rejected key keeps its old value", kind: controller.CommitResync,
			values:   controller.KeyValuePairs{"a": str("bad"), "e": str("bad")},
			wantKeys: []string{"a", "e"}, wantState: map[string]string{"a": "1"}},
		{name: "fatal: nothing applied", kind: controller.CommitUpdate,
			values:    controller.KeyValuePairs{"a": nil, "gone": str("x")},
			wantFatal: true, wantState: map[string]string{"a": "1"}},
		{name: "reapply is not checked", kind: controller.CommitReapply, wantState: map[string]string{"a": "1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := sb.Commit(ctx, &controller.Commit{Kind: tc.kind, Event: ev, Values: tc.values})
			var fatal *controller.FatalError
			require.Equal(t, tc.wantFatal, errors.As(err, &fatal), "fatal: %v", err)
			var got []string
			for _, ke := range controller.KeyErrors(err) {
				require.ErrorIs(t, ke, bad)
				got = append(got, ke.Key)
			}
			require.Equal(t, tc.wantKeys, got)
			if len(tc.wantKeys) > 0 {
				require.True(t, controller.IsPermanent(err))
			}
			state := map[string]string{}
			for k, v := range sb.State() {
				state[k] = v.(*wrapperspb.StringValue).GetValue()
			}
			require.Equal(t, tc.wantState, state)
		})
	}
}

func TestSouthboundRecordsContext(t *testing.T) {
	sb := &controllertest.Southbound{}
	ev := controller.NewDBResync()
	deadline := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	_, err := sb.Commit(ctx, &controller.Commit{Kind: controller.CommitReapply, Event: ev})
	require.NoError(t, err)
	cancel()
	_, err = sb.Commit(ctx, &controller.Commit{Kind: controller.CommitReapply, Event: ev})
	require.NoError(t, err)
	cs := sb.Commits()
	require.NoError(t, cs[0].CtxErr)
	require.True(t, cs[0].HasDeadline)
	require.True(t, deadline.Equal(cs[0].Deadline))
	require.ErrorIs(t, cs[1].CtxErr, context.Canceled)
}
