// Package controllertest provides working in-memory fakes for testing code
// that plugs into the controller package:
//
//   - [Txn], a transaction that records Put/Delete and the follow-up events
//     pushed with controller.PushFollowUp, for calling handlers' Resync and
//     Update directly;
//   - [EventRecorder], an [controller.EventLoop] that records pushed events;
//   - [Southbound], a [controller.Southbound] that records every commit
//     (with the state of its context), keeps the resulting state, and can be
//     told to fail a whole commit (Southbound.Fail) or to reject single keys
//     with [controller.KeyError] while applying the rest
//     (Southbound.RejectKey, a per-key function).
//
// All fakes are safe for concurrent use.
//
// # Limitations
//
// EventRecorder does not run handlers: it only records events (and can
// complete blocking ones). Use controller.New with a Southbound for tests
// that need real event processing.
package controllertest
