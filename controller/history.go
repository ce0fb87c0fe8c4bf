package controller

import (
	"sync"
	"time"
)

// HandlerOutcome records what one handler did with one event.
type HandlerOutcome struct {
	Handler  string
	Change   string // change description returned by Update
	Err      error
	Duration time.Duration
	Reverted bool // Revert was called on this handler
}

// Record describes one processed event in the [History].
type Record struct {
	// Seq is the number of the event in processing order, from 1.
	Seq             uint64
	Name            string
	Description     string
	Method          EventMethodType
	Direction       UpdateDirectionType   // updates only
	TransactionType UpdateTransactionType // updates only
	FollowUp        bool                  // pushed by a handler of the loop
	ResyncCount     int                   // resyncs only: the count handlers got
	Start, End      time.Time
	Handlers        []HandlerOutcome

	// Committed tells whether a transaction was handed to the southbound;
	// TxnSeq is the sequence number it returned and CommitErr its error.
	Committed bool
	TxnSeq    uint64
	CommitErr error

	// Err is the processing result passed to the event's Done.
	Err error
}

// Duration returns End - Start.
func (r Record) Duration() time.Duration { return r.End.Sub(r.Start) }

func (r Record) clone() Record {
	r.Handlers = append([]HandlerOutcome(nil), r.Handlers...)
	return r
}

// History keeps the most recent processed events in a ring of fixed size.
// It is safe for concurrent use. Queries return copies.
type History struct {
	mu    sync.Mutex
	ring  []Record // guarded by mu; slot reuse keeps memory bounded
	next  int      // guarded by mu; index of the slot to write next
	count int      // guarded by mu; number of valid slots
}

func newHistory(size int) *History {
	if size <= 0 {
		return &History{}
	}
	return &History{ring: make([]Record, size)}
}

// Cap returns the number of records the history keeps (0 = disabled).
func (h *History) Cap() int { return len(h.ring) }

// add copies r into the ring, reusing the slot's handler slice.
func (h *History) add(r *Record) {
	if len(h.ring) == 0 {
		return
	}
	h.mu.Lock()
	slot := &h.ring[h.next]
	handlers := append(slot.Handlers[:0], r.Handlers...)
	*slot = *r
	slot.Handlers = handlers
	h.next = (h.next + 1) % len(h.ring)
	if h.count < len(h.ring) {
		h.count++
	}
	h.mu.Unlock()
}

// at returns the i-th oldest record; caller holds mu.
func (h *History) at(i int) *Record {
	start := h.next - h.count
	if start < 0 {
		start += len(h.ring)
	}
	return &h.ring[(start+i)%len(h.ring)]
}

// Len returns the number of records held.
func (h *History) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.count
}

// BySeq returns the record of event number seq, if it is still held.
func (h *History) BySeq(seq uint64) (Record, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.count == 0 {
		return Record{}, false
	}
	first := h.at(0).Seq
	if seq < first || seq-first >= uint64(h.count) {
		return Record{}, false
	}
	r := h.at(int(seq - first))
	if r.Seq != seq {
		return Record{}, false
	}
	return r.clone(), true
}

// First returns up to n oldest records held, oldest first.
func (h *History) First(n int) []Record {
	h.mu.Lock()
	defer h.mu.Unlock()
	n = min(max(n, 0), h.count)
	out := make([]Record, n)
	for i := range n {
		out[i] = h.at(i).clone()
	}
	return out
}

// Last returns up to n most recent records, oldest first.
func (h *History) Last(n int) []Record {
	h.mu.Lock()
	defer h.mu.Unlock()
	n = min(max(n, 0), h.count)
	out := make([]Record, n)
	for i := range n {
		out[i] = h.at(h.count - n + i).clone()
	}
	return out
}

// Between returns the records of events whose processing started in
// [from, to), oldest first. A zero to means no upper bound.
func (h *History) Between(from, to time.Time) []Record {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []Record
	for i := range h.count {
		r := h.at(i)
		if r.Start.Before(from) || (!to.IsZero() && !r.Start.Before(to)) {
			continue
		}
		out = append(out, r.clone())
	}
	return out
}
