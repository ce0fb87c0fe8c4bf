package controller_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/controllertest"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testEvent is a configurable event for tests.
type testEvent struct {
	name     string
	method   controller.EventMethodType
	tt       controller.UpdateTransactionType
	dir      controller.UpdateDirectionType
	blocking bool
	done     chan error
}

func newUpdate(name string, tt controller.UpdateTransactionType, dir controller.UpdateDirectionType) *testEvent {
	return &testEvent{name: name, method: controller.Update, tt: tt, dir: dir, done: make(chan error, 1)}
}

func (e *testEvent) GetName() string                                   { return e.name }
func (e *testEvent) String() string                                    { return "test event " + e.name }
func (e *testEvent) Method() controller.EventMethodType                { return e.method }
func (e *testEvent) IsBlocking() bool                                  { return e.blocking }
func (e *testEvent) TransactionType() controller.UpdateTransactionType { return e.tt }
func (e *testEvent) Direction() controller.UpdateDirectionType         { return e.dir }
func (e *testEvent) Done(err error)                                    { e.done <- err }

// result returns the error passed to Done; it fails the test if Done was not called.
func (e *testEvent) result(t *testing.T) error {
	t.Helper()
	select {
	case err := <-e.done:
		return err
	default:
		t.Fatalf("event %s: Done not called", e.name)
		return nil
	}
}

// callLog records handler calls in order, safe for concurrent use.
type callLog struct {
	mu    sync.Mutex
	calls []string
}

func (c *callLog) add(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = append(c.calls, fmt.Sprintf(format, args...))
}

func (c *callLog) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.calls
	c.calls = nil
	return out
}

// handler returns a handler named name that logs its calls and puts
// "<name>/<event name>" = name into every transaction. fail, if non-nil,
// decides the error of Update/Resync for an event.
func handler(name string, log *callLog, fail func(ev controller.Event) error) *controller.HandlerFuncs {
	errFor := func(ev controller.Event) error {
		if fail == nil {
			return nil
		}
		return fail(ev)
	}
	return &controller.HandlerFuncs{
		Name: name,
		ResyncFunc: func(ev controller.Event, _ controller.KubeStateData, n int, txn controller.ResyncOperations) error {
			log.add("%s.Resync(%s,%d)", name, ev.GetName(), n)
			txn.Put(name+"/state", wrapperspb.String(name))
			return errFor(ev)
		},
		UpdateFunc: func(ev controller.Event, txn controller.UpdateOperations) (string, error) {
			log.add("%s.Update(%s)", name, ev.GetName())
			txn.Put(name+"/"+ev.GetName(), wrapperspb.String(name))
			return "put " + name, errFor(ev)
		},
		RevertFunc: func(ev controller.Event) error {
			log.add("%s.Revert(%s)", name, ev.GetName())
			return nil
		},
	}
}

// run starts l.Run in a goroutine. stop cancels it and returns Run's
// result; done yields that result once Run has returned (read it at most once).
func run(t *testing.T, l *controller.Loop) (stop func() error, done <-chan error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	finished := make(chan struct{})
	ch := make(chan error, 1)
	var res error
	go func() {
		res = l.Run(ctx)
		close(finished)
		ch <- res
	}()
	stop = func() error {
		cancel()
		<-finished
		return res
	}
	t.Cleanup(func() { _ = stop() })
	return stop, ch
}

func newLoop(t *testing.T, hs []controller.EventHandler, sb controller.Southbound, cfg controller.Config) *controller.Loop {
	t.Helper()
	l, err := controller.New(hs, sb, cfg)
	require.NoError(t, err)
	return l
}

func str(s string) proto.Message { return wrapperspb.String(s) }

func values(kvs controller.KeyValuePairs) map[string]string {
	out := make(map[string]string, len(kvs))
	for k, v := range kvs {
		if v == nil {
			out[k] = "<deleted>"
			continue
		}
		out[k] = v.(*wrapperspb.StringValue).GetValue()
	}
	return out
}

var _ = controllertest.Southbound{}
