package agent_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vswitchkit/vswitchkit/agent"
	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/embedetcd"
	"github.com/vswitchkit/vswitchkit/svcprocessor"
)

// TestExtensions: with Services "none" the agent renders no NAT44; the
// caller's renderer gets the services, the caller's handler runs after the
// agent's (IPAM already has the node ID when it sees the resync), the
// caller's runner runs with the agent and is stopped with it, and nothing
// can be added once Run started.
func TestExtensions(t *testing.T) {
	ctx := context.Background()
	etcd, err := embedetcd.Start(ctx, embedetcd.Config{UnsafeNoFsync: true})
	require.NoError(t, err)
	defer etcd.Close()
	cli, err := etcd.Client()
	require.NoError(t, err)
	defer cli.Close()
	put(t, cli, kubemodel.ServiceKey("default", "web"), &kubemodel.Service{Namespace: "default", Name: "web",
		ClusterIps: []string{"10.96.0.10"}, Ports: []*kubemodel.ServicePort{{Port: 80, TargetPortNumber: 8080}}})

	services := make(chan string, 10)
	nodeIDAtResync := make(chan uint32, 1)
	runnerStopped := make(chan error, 1)
	n := startNodeWith(t, cli, "node-1", func(a *agent.Agent) {
		assert.Nil(t, a.NAT, "no built-in renderer")
		require.NoError(t, a.AddServiceRenderer(svcprocessor.RendererFunc(func(ev svcprocessor.RenderEvent) error {
			if ev.Kind == svcprocessor.Resync {
				for _, s := range ev.Snapshot.Services {
					services <- s.ID.String()
				}
			}
			return nil
		})))
		require.NoError(t, a.AddHandler(&controller.HandlerFuncs{
			Name: "mine",
			ResyncFunc: func(_ controller.Event, _ controller.KubeStateData, _ int, txn controller.ResyncOperations) error {
				select {
				case nodeIDAtResync <- a.IPAM.NodeID():
				default:
				}
				return nil
			},
		}))
		require.NoError(t, a.AddRunner("mine", func(ctx context.Context) error {
			<-ctx.Done()
			runnerStopped <- ctx.Err()
			return ctx.Err()
		}))
		assert.Error(t, a.AddRunner("", nil))
	}, func(c *agent.Config) { c.Services = agent.ServicesNone })

	select {
	case s := <-services:
		assert.Equal(t, "default/web", s)
	case <-time.After(time.Minute):
		t.Fatal("the caller's renderer got no resync")
	}
	assert.NotZero(t, <-nodeIDAtResync, "the caller's handler runs after IPAM's")
	nat := n.nat(t)
	assert.Empty(t, append(nat.Static, nat.LB...), "no NAT44 mappings with Services none")

	assert.Error(t, n.agent.AddRunner("late", func(context.Context) error { return nil }))
	assert.Error(t, n.agent.AddServiceRenderer(svcprocessor.RendererFunc(func(svcprocessor.RenderEvent) error { return nil })))
	assert.ErrorIs(t, n.agent.AddHandler(&controller.HandlerFuncs{Name: "late"}), controller.ErrRegisterAfterRun)
	assert.ErrorIs(t, n.agent.Run(ctx), agent.ErrAlreadyRunning)

	require.NoError(t, n.stop())
	assert.True(t, errors.Is(<-runnerStopped, context.Canceled), "the runner is stopped with the agent")
}

// TestRunReturnsTheFailure: a component that fails stops the agent, and
// Run returns its error, prefixed with the package and the component's
// name once (CONTRIBUTING R8).
func TestRunReturnsTheFailure(t *testing.T) {
	cli := startEtcd(t, "node-1")
	broken := errors.New("mine: broken")
	fail := make(chan struct{})
	var runErr error
	n := startNodeWith(t, cli, "node-1", func(a *agent.Agent) {
		require.NoError(t, a.AddRunner("mine", func(ctx context.Context) error {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-fail:
				return broken
			}
		}))
	})
	close(fail)
	select {
	case runErr = <-n.done:
	case <-time.After(time.Minute):
		t.Fatal("the agent did not stop")
	}
	n.done <- nil // for the cleanup's stop
	require.ErrorIs(t, runErr, broken)
	assert.EqualError(t, runErr, "agent: mine: broken")
	assert.NotErrorIs(t, runErr, context.Canceled)
}
