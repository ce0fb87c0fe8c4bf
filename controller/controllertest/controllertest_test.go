package controllertest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/controllertest"
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
