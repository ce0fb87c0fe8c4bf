package controller_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/controllertest"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/controller/podiface"
)

func TestIsPermanent(t *testing.T) {
	keyErr := &controller.KeyError{Key: "vpp/route/0/10.0.0.0/8", Err: errors.New("bad next hop")}
	perm := controller.NewPermanentError(errors.New("no NAT44 plugin"))
	transient := errors.New("timeout")
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"plain", transient, false},
		{"key error", keyErr, true},
		{"permanent", perm, true},
		{"wrapped key error", fmt.Errorf("commit: %w", keyErr), true},
		{"joined key errors", errors.Join(keyErr, &controller.KeyError{Key: "b", Err: transient}), true},
		{"joined with permanent", errors.Join(keyErr, perm), true},
		{"joined with transient", errors.Join(keyErr, transient), false},
		{"nested join", errors.Join(fmt.Errorf("sb 0: %w", errors.Join(keyErr, perm)), keyErr), true},
		{"nested join with transient", errors.Join(fmt.Errorf("sb 0: %w", errors.Join(keyErr, transient))), false},
		{"fatal around key error", controller.NewFatalError(keyErr), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, controller.IsPermanent(tc.err))
		})
	}
	assert.Nil(t, controller.NewPermanentError(nil))
	assert.ErrorIs(t, perm, perm.(*controller.PermanentError).Unwrap())
}

func TestKeyErrors(t *testing.T) {
	a := &controller.KeyError{Key: "a", Err: errors.New("x")}
	b := &controller.KeyError{Key: "b", Err: errors.New("y")}
	err := errors.Join(fmt.Errorf("southbound 0: %w", errors.Join(a, errors.New("other"))), b)
	got := controller.KeyErrors(err)
	require.Len(t, got, 2)
	assert.Equal(t, "a", got[0].Key)
	assert.Equal(t, "b", got[1].Key)
	assert.Equal(t, "key a: x", got[0].Error())
	assert.Empty(t, controller.KeyErrors(nil))
}

// TestRegisterBeforeRun builds the loop first and its handlers after it,
// the order of components that need the loop in their constructor.
func TestRegisterBeforeRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &callLog{}
		sb := &controllertest.Southbound{}
		l := newLoop(t, nil, sb, controller.Config{})
		require.NoError(t, l.Register(handler("a", log, nil)))
		require.NoError(t, l.Register(handler("b", log, nil), handler("c", log, nil)))
		require.ErrorContains(t, l.Register(handler("d", log, nil), nil), "handler 1 is nil")

		run(t, l)
		require.NoError(t, l.PushEvent(controller.NewDBResync()))
		synctest.Wait()
		assert.Equal(t, []string{
			"a.Resync(Database Resync,1)", "b.Resync(Database Resync,1)", "c.Resync(Database Resync,1)",
		}, log.take())
		assert.ErrorIs(t, l.Register(handler("e", log, nil)), controller.ErrRegisterAfterRun)
	})
}

// ownerSB is a recording southbound that owns the keys with its prefix.
type ownerSB struct {
	controllertest.Southbound
	prefix string
	err    error
}

func (s *ownerSB) OwnsKey(key string) bool { return strings.HasPrefix(key, s.prefix) }

func (s *ownerSB) Commit(ctx context.Context, c *controller.Commit) (uint64, error) {
	if _, err := s.Southbound.Commit(ctx, c); err != nil {
		return 0, err
	}
	return 0, s.err
}

func TestMultiSouthbound(t *testing.T) {
	vpp := &ownerSB{prefix: "vpp/"}
	linux := &ownerSB{prefix: "linux/"}
	all := &controllertest.Southbound{}
	m := controller.MultiSouthbound(vpp, linux, all)
	ctx := context.Background()
	ev := newUpdate("u", controller.BestEffort, controller.Forward)

	_, err := m.Commit(ctx, &controller.Commit{Kind: controller.CommitResync, Event: controller.NewDBResync(), Values: controller.KeyValuePairs{
		"vpp/a": str("1"), "linux/b": str("2"), "handler/c": str("3"),
	}})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"vpp/a": "1"}, values(vpp.State()))
	assert.Equal(t, map[string]string{"linux/b": "2"}, values(linux.State()))
	assert.Equal(t, map[string]string{"vpp/a": "1", "linux/b": "2", "handler/c": "3"}, values(all.State()))

	// An update without any of a southbound's keys does not reach it.
	seq, err := m.Commit(ctx, &controller.Commit{Kind: controller.CommitUpdate, Event: ev, Values: controller.KeyValuePairs{"vpp/a": nil}})
	require.NoError(t, err)
	assert.Equal(t, uint64(2), seq)
	assert.Len(t, vpp.Commits(), 2)
	assert.Len(t, linux.Commits(), 1)
	assert.Empty(t, vpp.State())

	// Errors are joined; key errors of two southbounds stay permanent.
	vpp.err = &controller.KeyError{Key: "vpp/x", Err: errors.New("bad")}
	linux.err = &controller.KeyError{Key: "linux/y", Err: errors.New("bad")}
	_, err = m.Commit(ctx, &controller.Commit{Kind: controller.CommitReapply, Event: ev})
	require.Error(t, err)
	assert.True(t, controller.IsPermanent(err))
	assert.Len(t, controller.KeyErrors(err), 2)

	linux.err = errors.New("transient")
	_, err = m.Commit(ctx, &controller.Commit{Kind: controller.CommitReapply, Event: ev})
	assert.False(t, controller.IsPermanent(err))

	linux.err = controller.NewFatalError(errors.New("gone"))
	_, err = m.Commit(ctx, &controller.Commit{Kind: controller.CommitReapply, Event: ev})
	var fatal *controller.FatalError
	assert.ErrorAs(t, err, &fatal)
}

func TestAddPodAttachment(t *testing.T) {
	ev := controller.NewAddPodEvent(kubemodel.PodID{Namespace: "ns", Name: "p"}, "c1", "/run/netns/p")
	ev.IfName, ev.InterfaceType, ev.HostIfName = "eth0", podiface.AfPacket, "vskabc"
	assert.Equal(t, podiface.Attachment{
		Pod: kubemodel.PodID{Namespace: "ns", Name: "p"}, ContainerID: "c1", NetworkNamespace: "/run/netns/p",
		IfName: "eth0", InterfaceType: podiface.AfPacket, HostIfName: "vskabc",
	}, ev.Attachment())
}

func TestContextOfHandlerTransaction(t *testing.T) {
	assert.Equal(t, context.Background(), controller.ContextOf(nil), "no transaction: background")
	type key struct{}
	seen := make(chan context.Context, 1)
	loop, err := controller.New(nil, &controllertest.Southbound{}, controller.Config{})
	require.NoError(t, err)
	require.NoError(t, loop.Register(&controller.HandlerFuncs{
		Name: "io",
		ResyncFunc: func(_ controller.Event, _ controller.KubeStateData, _ int, txn controller.ResyncOperations) error {
			seen <- controller.ContextOf(txn)
			return nil
		},
	}))
	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), key{}, "run"))
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- loop.Run(ctx) }()
	require.NoError(t, loop.PushEvent(controller.NewDBResync()))
	assert.Equal(t, "run", (<-seen).Value(key{}), "the handler sees the loop's context")
	cancel()
	<-done
}
