package controller_test

import (
	"context"
	"errors"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/controllertest"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// benchEvent is a non-blocking BestEffort update.
type benchEvent struct{}

func (benchEvent) GetName() string                                   { return "bench" }
func (benchEvent) String() string                                    { return "bench update" }
func (benchEvent) Method() controller.EventMethodType                { return controller.Update }
func (benchEvent) IsBlocking() bool                                  { return false }
func (benchEvent) TransactionType() controller.UpdateTransactionType { return controller.BestEffort }
func (benchEvent) Direction() controller.UpdateDirectionType         { return controller.Forward }
func (benchEvent) Done(error)                                        {}

// BenchmarkLoopUpdate8Handlers pushes b.N Update events from another
// goroutine and measures until the loop has processed them all: 8 handlers
// each put one key, history is on, commits go to the in-memory southbound.
func BenchmarkLoopUpdate8Handlers(b *testing.B) {
	hs := make([]controller.EventHandler, 8)
	for i := range hs {
		key := "handler-" + strconv.Itoa(i) + "/value"
		val := wrapperspb.String(strconv.Itoa(i))
		hs[i] = &controller.HandlerFuncs{
			Name: "handler-" + strconv.Itoa(i),
			UpdateFunc: func(_ controller.Event, txn controller.UpdateOperations) (string, error) {
				txn.Put(key, val)
				return "", nil
			},
		}
	}
	sb := &controllertest.Southbound{NoRecord: true}
	l, err := controller.New(hs, sb, controller.Config{HistorySize: 1000})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	if err := l.PushEvent(controller.NewDBResync()); err != nil {
		b.Fatal(err)
	}
	for l.Stats().Processed < 1 {
		runtime.Gosched()
	}
	base := l.Stats().Processed

	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	ev := benchEvent{}
	for i := 0; i < b.N; {
		switch err := l.PushEvent(ev); {
		case err == nil:
			i++
		case errors.Is(err, controller.ErrQueueFull):
			runtime.Gosched()
		default:
			b.Fatal(err)
		}
	}
	want := base + uint64(b.N)
	for l.Stats().Processed < want {
		runtime.Gosched()
	}
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "events/s")
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		b.Fatal(err)
	}
	if h := l.History().Last(1); len(h) != 1 || len(h[0].Handlers) != 8 {
		b.Fatalf("history not recorded: %+v", h)
	}
}
