package watcher

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/vswitchkit/vswitchkit/controller"
)

// errGaveUp is returned by pusher.push when the loop kept refusing a change
// for longer than the give-up time. The watcher then delivers a fresh
// DBResync instead.
var errGaveUp = errors.New("event loop kept refusing the event")

// pusher delivers events to the event loop, retrying with exponential
// backoff (no jitter: the only contender is the loop's own queue) while the
// loop answers with an error other than controller.ErrStopped (normally
// controller.ErrQueueFull). It is owned by the Run goroutine.
//
// A loop that refuses events is a degraded state: onRefused reports its
// start (the first refusal after an accepted event), onAccepted its end
// (the first event accepted after refusals); neither is called per event
// or per retry.
type pusher struct {
	loop       controller.EventLoop
	min, max   time.Duration
	stats      *counters
	onRefused  func(ev controller.Event, err error) // optional
	onAccepted func()                               // optional
	refused    bool                                 // the last answer was a refusal
}

// accepted notes that the loop took an event.
func (p *pusher) accepted() {
	if p.refused {
		p.refused = false
		if p.onAccepted != nil {
			p.onAccepted()
		}
	}
}

// push delivers ev. giveUp > 0 bounds the time spent retrying: push gives
// up instead of waiting past it; 0 retries until ctx is done. It returns
// nil, errGaveUp, ctx.Err() or an error wrapping controller.ErrStopped.
func (p *pusher) push(ctx context.Context, ev controller.Event, giveUp time.Duration) error {
	// The first attempt outside backoff.Retry, which allocates its state:
	// a change normally gets into the loop at once.
	err := p.loop.PushEvent(ev)
	if err == nil {
		p.accepted()
		return nil
	}
	first := err // the operation's first answer
	_, err = backoff.Retry(ctx, func() (struct{}, error) {
		err := first
		if first != nil {
			first = nil
		} else {
			err = p.loop.PushEvent(ev)
		}
		switch {
		case err == nil:
			p.accepted()
			return struct{}{}, nil
		case errors.Is(err, controller.ErrStopped):
			return struct{}{}, backoff.Permanent(fmt.Errorf("watcher: push %s: %w", ev.GetName(), err))
		}
		p.stats.pushRetries.Add(1)
		if !p.refused {
			p.refused = true
			if p.onRefused != nil {
				p.onRefused(ev, err)
			}
		}
		return struct{}{}, err
	},
		backoff.WithBackOff(&backoff.ExponentialBackOff{InitialInterval: p.min, Multiplier: 2, MaxInterval: p.max}),
		backoff.WithMaxElapsedTime(giveUp))
	switch {
	case err == nil, errors.Is(err, controller.ErrStopped):
		return err
	case ctx.Err() != nil:
		return ctx.Err()
	}
	return errGaveUp
}
