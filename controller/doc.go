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
//	err = loop.Run(ctx)            // returns after the Shutdown event when ctx ends
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
// The loop keeps the Kubernetes state: DBResync replaces it, KubeStateChange
// updates it before the handlers run, and resync handlers receive it. The
// loop takes ownership of the maps of a pushed DBResync; handlers must treat
// the state they receive as read-only.
//
// # Start-up
//
// Nothing but the first DBResync is processed before it: other events wait
// (still counting against Config.QueueSize), and run in push order right after
// it. Shutdown is the only exception. If no DBResync arrives within
// Config.StartupResyncDeadline, [Loop.Healthy] reports
// ErrStartupResyncMissing. Handlers get resyncCount 1 for the start-up resync
// and higher numbers for every later resync.
//
// # Errors
//
// One transaction per event, committed after the handlers ran:
//
//   - BestEffort: an error does not stop the other handlers; the transaction
//     is committed, Done gets the joined errors, and a healing resync is
//     scheduled (BestEffortIgnoreErrors: the same without healing).
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
// Config.MaxHealingDelay; after Config.MaxHealingAttempts failed healing
// resyncs in a row Run returns an error wrapping ErrHealingFailed. Requests
// for healing while one is pending are coalesced.
//
// # External configuration
//
// External configuration arrives per source: DBResync.ExternalConfig (source
// [RemoteDBSource]), ExternalConfigResync (replaces a source) and
// ExternalConfigChange (changes keys of a source; a nil value deletes). It is
// merged over the handlers' output deterministically: any source wins over
// the handlers, and among sources the one whose name sorts last wins. Deleting
// a key from a source reveals the next value down. Handlers read the
// effective configuration with [Loop.GetConfig] ([ConfigRetriever]).
//
// # Follow-up events
//
// An event pushed by a handler (on the loop goroutine) is a follow-up: it
// runs right after the current event, before anything queued from outside,
// and follow-ups run in the order they were pushed. A blocking follow-up is
// refused with ErrBlockingFollowUp, since waiting for it would deadlock.
//
// # History and metrics
//
// [Loop.History] keeps the last Config.HistorySize processed events with each
// handler's outcome and duration, the commit's sequence number and error,
// queryable by sequence number, time window, or first/last N. [Loop.Stats]
// returns counters an application can export as metrics.
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
// until its context ends, then processes a Shutdown event (so handlers can
// delete what they own, bounded by Config.ShutdownTimeout), completes every
// event still queued with ErrStopped, and returns ctx.Err(). A pushed
// Shutdown event stops it the same way with a nil result. Run starts no
// goroutine: when it returns, nothing of the loop is running.
package controller
