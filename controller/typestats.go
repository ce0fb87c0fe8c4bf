package controller

import (
	"sync"
	"sync/atomic"
	"time"
)

// EventTypeStats are the counters of the events of one name (see
// [Event.GetName]), for export as metrics. It is a value (a copy).
type EventTypeStats struct {
	Processed uint64        // events processed
	Failed    uint64        // events whose processing returned an error
	Duration  time.Duration // total processing time of the processed events
}

// HandlerStats are the counters of one handler (by its String), for
// export as metrics. It is a value (a copy).
type HandlerStats struct {
	// Errors counts the errors its Resync and Update calls returned.
	Errors uint64
}

// typeStats keeps the per-event-name and per-handler counters. The Run
// goroutine is the only writer of the maps: it reads them without the
// lock and inserts under mu; other goroutines read them under mu. The
// counters themselves are atomic.
type typeStats struct {
	mu       sync.Mutex
	events   map[string]*eventCounters
	handlers map[string]*atomic.Uint64
}

type eventCounters struct {
	processed, failed atomic.Uint64
	nanos             atomic.Int64
}

// countEvent counts one processed event; called on the Run goroutine.
func (s *typeStats) countEvent(name string, failed bool, d time.Duration) {
	c := s.events[name]
	if c == nil {
		c = new(eventCounters)
		s.mu.Lock()
		if s.events == nil {
			s.events = make(map[string]*eventCounters)
		}
		s.events[name] = c
		s.mu.Unlock()
	}
	c.processed.Add(1)
	if failed {
		c.failed.Add(1)
	}
	c.nanos.Add(int64(d))
}

// countHandlerError counts an error of a handler; called on the Run
// goroutine.
func (s *typeStats) countHandlerError(name string) {
	c := s.handlers[name]
	if c == nil {
		c = new(atomic.Uint64)
		s.mu.Lock()
		if s.handlers == nil {
			s.handlers = make(map[string]*atomic.Uint64)
		}
		s.handlers[name] = c
		s.mu.Unlock()
	}
	c.Add(1)
}

// EventStats returns the counters of every event name processed so far.
// Event names are expected to be constant per event type (as those of
// this module are): the map has one entry per name ever seen. It is safe
// for concurrent use; the map is the caller's.
func (l *Loop) EventStats() map[string]EventTypeStats {
	s := &l.typeStats
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]EventTypeStats, len(s.events))
	for name, c := range s.events {
		out[name] = EventTypeStats{Processed: c.processed.Load(), Failed: c.failed.Load(), Duration: time.Duration(c.nanos.Load())}
	}
	return out
}

// HandlerStats returns the counters of every handler that returned an
// error so far (handlers without errors are absent). It is safe for
// concurrent use; the map is the caller's.
func (l *Loop) HandlerStats() map[string]HandlerStats {
	s := &l.typeStats
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]HandlerStats, len(s.handlers))
	for name, c := range s.handlers {
		out[name] = HandlerStats{Errors: c.Load()}
	}
	return out
}
