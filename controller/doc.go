// Package controller is the event loop at the heart of a vswitchkit agent:
// the event vocabulary (Event, UpdateEvent, EventHandler, methods,
// directions, transaction types, errors, the built-in events) and [Loop],
// which runs the registered handlers for one event at a time and commits one
// transaction per event to a [Southbound].
//
// # Usage
//
//	loop, err := controller.New(nil, reconciler, controller.Config{Logger: log})
//	// components that push events take the loop in their constructor:
//	nodeSync, err := nodesync.New(nodeName, db, loop, nodesync.Config{})
//	...
//	err = loop.Register(nodeSync, ipam, services.Handler(), renderer) // dependency order
//	...
//	go watcher.Run(ctx)            // pushes DBResync, KubeStateChange, ...
//	go func() { errc <- loop.Run(ctx) }() // returns after the Shutdown event when ctx ends
//	err = loop.WaitStartupResync(ctx)     // the start-up resync was processed: ready
//
// # Events
//
// Every event has a Method. FullResync and UpstreamResync events (DBResync,
// ExternalConfigResync, HealingResync after an error) call every interested
// handler's Resync in registration order; together the handlers put the
// complete desired state into the transaction, which is committed as a
// [CommitResync]. Update events (KubeStateChange, ExternalConfigChange,
// AddPod, DeletePod, Shutdown, and the application's own) implement
// [UpdateEvent] and call Update in registration order (Forward) or reversed
// (Reverse); the changes are committed as a [CommitUpdate]. A
// DownstreamResync (periodic HealingResync) calls no handler: the southbound
// re-applies the committed state ([CommitReapply]).
//
// The loop keeps its inputs, the Kubernetes state and the external
// configuration, and updates them from an event before any handler runs:
// DBResync replaces both, ExternalConfigResync replaces one source,
// KubeStateChange and ExternalConfigChange change them. So whatever the
// handlers do with the event (fail, abort), the next resync, a healing
// resync included, sees the input. Resync handlers receive the Kubernetes
// state. The loop takes ownership of the maps of a pushed DBResync;
// handlers must treat the state they receive as read-only.
//
// # Start-up
//
// Nothing but the first DBResync is processed before it: other events wait
// (still counting against Config.QueueSize), and run in push order right after
// it and its follow-ups. Shutdown is the only exception. If no DBResync arrives within
// Config.StartupResyncDeadline, [Loop.Healthy] reports
// ErrStartupResyncMissing. Handlers get resyncCount 1 for the start-up resync
// and higher numbers for every later resync.
//
// # Waiting for the loop
//
// An application that embeds the loop waits with [Loop.WaitStartupResync]
// until the start-up resync was processed (its error, or
// ErrStartupResyncMissing once the deadline passed), or selects on
// [Loop.Ready]. [Loop.Sync] is a barrier: it returns once every event
// pushed before it, and their follow-ups, have been processed. Both take a
// context, and both return ErrNotRunning when Run has not been called
// within [NotRunningGrace], instead of waiting for ever.
//
// # Errors
//
// One transaction per event, committed after the handlers ran. Done and the
// history get every error of the event, joined: the handlers' and the
// commit's.
//
//   - BestEffort: an error does not stop the other handlers; the transaction
//     is committed and a healing resync is scheduled
//     (BestEffortIgnoreErrors: the same without healing for handler errors).
//   - RevertOnFailure: the first error stops the event; nothing is committed
//     and Revert is called on the handlers that already ran, in reverse order.
//   - [AbortEventError] (any event): stop, no commit (RevertOnFailure reverts),
//     and a healing resync right away.
//   - [FatalError] (from a handler or the southbound): the loop stops and Run
//     returns the error.
//   - A commit error is healed too; for RevertOnFailure the handlers are also
//     reverted and the loop's record of their desired state restored.
//   - Resync errors are best effort: the transaction is committed and a
//     healing resync is scheduled.
//
// Healing resyncs back off from Config.HealingDelay, doubling up to
// Config.MaxHealingDelay, jittered; while they fail in a row
// [Loop.Healthy] reports [ErrHealing] and the loop keeps healing — unless
// Config.MaxHealingAttempts is positive: after that many failed healing
// resyncs in a row Run returns an error wrapping ErrHealingFailed. Requests
// for healing while one is pending are coalesced.
//
// # Errors a resync cannot heal
//
// Bad input must not stop the agent. An error is permanent ([IsPermanent])
// when it is a [KeyError] (a value rejected for good, from the southbound
// for a key of the desired state or from a handler for a key of its input)
// or is marked with [NewPermanentError] (a condition that only the
// environment can end, such as a data plane without an API), or joins only
// such errors. A permanent error is recorded (Done, history, [Stats],
// [Loop.Healthy]) but never healed, so it never counts towards
// MaxHealingAttempts; the loop keeps running and applies everything else.
// An error that joins permanent and transient errors heals for the
// transient part, and a healing resync that fails only permanently counts
// as a success. RevertOnFailure is the exception: after a failed commit the
// handlers are reverted while the southbound may have applied the other
// keys, so the loop heals.
//
// The loop keeps the keys rejected for good ([Loop.RejectedKeys]): a resync
// whose errors are all permanent replaces them with its KeyErrors; an
// update event whose errors are all permanent removes the keys it carried
// (the keys of its commit, and the key of a KubeStateChange) that were not
// rejected again, and adds the new ones; with a transient error keys are
// only added. A permanent error that is not a KeyError stays outstanding:
// the southbound's until a resync or reapply commit returns without one, a
// handler's until its Resync returns without one. While anything is
// rejected or outstanding, [Loop.Healthy] returns an error wrapping
// ErrDegraded: the agent is degraded, not dead; restarting it does not
// help, the input must change.
//
// # External configuration
//
// External configuration arrives per source: DBResync.ExternalConfig (source
// [RemoteDBSource]), ExternalConfigResync (replaces a source) and
// ExternalConfigChange (changes keys of a source; a nil value deletes). It is
// merged over the handlers' output deterministically when a transaction is
// committed: any source wins over the handlers, and among sources the one
// whose name sorts last wins. Deleting a key from a source reveals the next
// value down.
//
// [Loop.GetConfig] ([ConfigRetriever]) returns the handlers' value of a key,
// not the merged one: the value in the current transaction, else the value
// the handlers committed last. This is the reference's contract ("the value
// in the controller's transaction, else the stored value from internal
// config"), and the right one for its purpose, a handler adjusting a value
// that another handler produced: were the external value returned, the
// handler would copy an override into the handlers' own state, and removing
// the override later would no longer reveal the handlers' value.
//
// # Follow-up events
//
// An event a handler pushes while it handles an event is a follow-up: it
// runs right after the current event, before anything queued from outside
// and before any timer, and follow-ups run in the order they were pushed.
// Handlers push them with [PushFollowUp] on the transaction they received.
// A handler that holds the loop only as an [EventLoop] may call PushEvent
// instead: the loop recognises a push from its own goroutine by goroutine
// ID (github.com/petermattis/goid), checked only while an event is in
// progress; a push from another goroutine at that time is an ordinary
// outside event. Either way a blocking follow-up is refused with
// ErrBlockingFollowUp, since waiting for it would deadlock.
//
// # Ordering
//
// [Loop.Run] takes one step at a time, the first that applies: stop after a
// fatal error; after cancellation, Shutdown; the oldest follow-up; the next
// outside event in push order (through the start-up gate); a due timer
// (healing, periodic healing, start-up deadline); else wait. Outside events
// are taken from the queue in batches, and timers act between batches, so
// a due healing resync waits for at most one batch. The rules and the
// invariants they keep are written next to the code, in Run.
//
// # History and metrics
//
// [Loop.History] keeps the last Config.HistorySize processed events with each
// handler's outcome and duration, the commit's sequence number and error,
// queryable by sequence number, time window, or first/last N. [Loop.Stats]
// returns counters an application can export as metrics, [Loop.Healthy] a
// readiness verdict (ErrStartupResyncMissing, ErrDegraded) and
// [Loop.RejectedKeys] the keys rejected for good.
//
// # Concurrency
//
// Handlers and the southbound are called on the goroutine that calls Run,
// one call at a time. PushEvent never blocks; it returns ErrQueueFull when
// the bounded queue is full and ErrStopped after the loop stopped.
//
// # Lifecycle
//
// [New] does no I/O and starts no goroutine. [Loop.Run] processes events
// until its context ends. Then it finishes the event in progress and
// starts no other event, and processes a Shutdown event so that handlers
// can delete what they own. A handler cannot be interrupted; the loop
// tells it when to give up through [ContextOf]: the context of the event
// in progress is not cancelled with Run's, but Config.ShutdownTimeout
// later (the event's commit gets Run's context, cancelled by then).
// Config.ShutdownTimeout bounds the Shutdown event as far as a synchronous
// call can be bounded: its handlers and its commit get a context with that
// deadline (not cancelled with Run's), and once the deadline passed no
// further handler is called and nothing is committed; a handler that never
// returns still blocks Run. Everything still pending (queued events,
// follow-ups, events held by the start-up gate) completes with ErrStopped,
// and Run returns ctx.Err(). A pushed Shutdown event stops the loop the
// same way with a nil result. Run starts no goroutine: when it returns,
// nothing of the loop is running.
package controller
