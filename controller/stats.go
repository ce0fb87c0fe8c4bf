package controller

import "sync/atomic"

// Stats is a snapshot of the loop's counters, for export as metrics.
type Stats struct {
	Queued             int    // outside events waiting (including those held by the start-up gate)
	Processed          uint64 // events processed
	Failed             uint64 // events whose processing returned an error
	FollowUps          uint64 // follow-up events processed
	Resyncs            uint64 // FullResync and UpstreamResync events processed
	DownstreamResyncs  uint64
	HealingScheduled   uint64 // healing resyncs scheduled after errors
	HealingFailed      uint64 // healing resyncs that failed
	HealingFailing     int    // healing resyncs that failed in a row right now (0 once one succeeds)
	Commits            uint64 // transactions handed to the southbound
	CommitErrors       uint64
	Reverts            uint64 // RevertOnFailure events reverted
	Aborts             uint64 // events aborted with AbortEventError
	QueueFull          uint64 // PushEvent calls refused with ErrQueueFull
	PermanentErrors    uint64 // permanent errors from handlers and the southbound (each KeyError counts once)
	RejectedKeys       int    // keys rejected for good right now (see Loop.RejectedKeys)
	StartupResyncDone  bool   // the first DBResync has been processed: its handlers ran and its transaction was committed (or the event failed)
	StartupDeadlineHit bool
}

type counters struct {
	processed, failed, followUps, resyncs, downstream atomic.Uint64
	healScheduled, healFailed, commits, commitErrors  atomic.Uint64
	reverts, aborts, queueFull, permanent             atomic.Uint64
	startupDone, deadlineHit                          atomic.Bool
	healFailing                                       atomic.Int64
}
