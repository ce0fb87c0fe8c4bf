package controller_test

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/controllertest"
)

// TestEventAndHandlerStats: events are counted per name with their
// failures and total processing time (handlers that sleep make the
// durations exact under synctest); handler errors are counted per handler,
// with history on or off.
func TestEventAndHandlerStats(t *testing.T) {
	for _, tc := range []struct {
		name    string
		history int
	}{
		{"history on", 0},
		{"history off", -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				slow := &controller.HandlerFuncs{
					Name: "slow",
					UpdateFunc: func(ev controller.Event, _ controller.UpdateOperations) (string, error) {
						time.Sleep(time.Duration(len(ev.GetName())) * time.Second)
						return "", nil
					},
				}
				failing := handler("failing", &callLog{}, func(ev controller.Event) error {
					if ev.GetName() == "boom" {
						return errors.New("boom")
					}
					return nil
				})
				l := newLoop(t, []controller.EventHandler{slow, failing}, &controllertest.Southbound{},
					controller.Config{HistorySize: tc.history, HealingDelay: time.Hour})
				run(t, l)
				require.Empty(t, l.EventStats(), "nothing processed yet")
				require.NoError(t, l.PushEvent(controller.NewDBResync()))
				for _, name := range []string{"ab", "ab", "boom", "ab"} {
					require.NoError(t, l.PushEvent(newUpdate(name, controller.BestEffortIgnoreErrors, controller.Forward)))
				}
				time.Sleep(time.Minute) // the handlers sleep 10s in all
				synctest.Wait()

				stats := l.EventStats()
				require.Equal(t, controller.EventTypeStats{Processed: 3, Duration: 6 * time.Second}, stats["ab"])
				require.Equal(t, controller.EventTypeStats{Processed: 1, Failed: 1, Duration: 4 * time.Second}, stats["boom"])
				require.Equal(t, uint64(1), stats[controller.NewDBResync().GetName()].Processed)
				require.Len(t, stats, 3)
				require.Equal(t, map[string]controller.HandlerStats{"failing": {Errors: 1}}, l.HandlerStats())

				// Copies: changing a result does not change the loop's.
				stats["ab"] = controller.EventTypeStats{}
				require.Equal(t, uint64(3), l.EventStats()["ab"].Processed)
			})
		})
	}
}
