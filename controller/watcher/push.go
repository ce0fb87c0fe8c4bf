package watcher

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/vswitchkit/vswitchkit/controller"
)

// errGaveUp is returned by pusher.push when the loop kept refusing a change
// for longer than the give-up time. The watcher then delivers a fresh
// DBResync instead.
var errGaveUp = errors.New("event loop kept refusing the event")

// pusher delivers events to the event loop, retrying with exponential
// backoff while the loop answers with an error other than
// controller.ErrStopped (normally controller.ErrQueueFull). It is owned by
// the Run goroutine.
type pusher struct {
	loop     controller.EventLoop
	min, max time.Duration
	stats    *counters
	onRetry  func(ev controller.Event, err error) // first refusal of an event
}

// push delivers ev. giveUp > 0 bounds the time spent retrying; 0 retries
// until ctx is done. It returns nil, errGaveUp, ctx.Err() or an error
// wrapping controller.ErrStopped.
func (p *pusher) push(ctx context.Context, ev controller.Event, giveUp time.Duration) error {
	var deadline time.Time
	if giveUp > 0 {
		deadline = time.Now().Add(giveUp)
	}
	delay := p.min
	for attempt := 0; ; attempt++ {
		err := p.loop.PushEvent(ev)
		if err == nil {
			return nil
		}
		if errors.Is(err, controller.ErrStopped) {
			return fmt.Errorf("push %s: %w", ev.GetName(), err)
		}
		p.stats.pushRetries.Add(1)
		if attempt == 0 && p.onRetry != nil {
			p.onRetry(ev, err)
		}
		if giveUp > 0 && time.Now().After(deadline) {
			return errGaveUp
		}
		if err := sleep(ctx, delay); err != nil {
			return err
		}
		delay = min(2*delay, p.max)
	}
}

// sleep waits for d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// backoff is an exponential backoff with ±20% jitter. It is owned by one
// goroutine.
type backoff struct {
	min, max, cur time.Duration
}

func (b *backoff) next() time.Duration {
	if b.cur == 0 {
		b.cur = b.min
	} else {
		b.cur = min(2*b.cur, b.max)
	}
	jitter := time.Duration((rand.Float64()*0.4 - 0.2) * float64(b.cur))
	return b.cur + jitter
}

func (b *backoff) reset() { b.cur = 0 }
