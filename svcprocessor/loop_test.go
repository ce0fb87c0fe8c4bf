package svcprocessor_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/controllertest"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/svcprocessor"
)

// TestBadInputInTheEventLoop: a service value that names another service,
// delivered through the event loop, is rejected for its key; the loop keeps
// running without healing, reports the key, and clears it once a correct
// value arrives.
func TestBadInputInTheEventLoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, svcprocessor.Config{})
		l, err := controller.New([]controller.EventHandler{f.sp.Handler()}, &controllertest.Southbound{}, controller.Config{})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- l.Run(ctx) }()
		defer func() {
			cancel()
			require.ErrorIs(t, <-done, context.Canceled)
		}()

		require.NoError(t, l.PushEvent(controller.NewDBResync()))
		key := kubemodel.ServiceKey("ns", "s")
		require.NoError(t, l.PushEvent(&controller.KubeStateChange{Resource: kubemodel.ServiceResource, Key: key,
			NewValue: mkService("other", "x", nil)}))
		time.Sleep(time.Hour)
		synctest.Wait()
		assert.Nil(t, f.sp.Service(sid("other", "x")), "the value did not create another service")
		assert.Nil(t, f.sp.Service(sid("ns", "s")))
		rejected := l.RejectedKeys()
		require.Contains(t, rejected, key)
		assert.ErrorIs(t, rejected[key], svcprocessor.ErrUnexpectedValue)
		assert.ErrorIs(t, l.Healthy(), controller.ErrDegraded)
		assert.Zero(t, l.Stats().HealingScheduled)

		require.NoError(t, l.PushEvent(&controller.KubeStateChange{Resource: kubemodel.ServiceResource, Key: key,
			PrevValue: mkService("other", "x", nil), NewValue: mkService("ns", "s", nil)}))
		synctest.Wait()
		assert.NotNil(t, f.sp.Service(sid("ns", "s")))
		assert.Empty(t, l.RejectedKeys())
		assert.NoError(t, l.Healthy())
	})
}
