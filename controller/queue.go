package controller

// fifo is a first-in first-out queue of events that reuses its buffer: once
// it runs empty, the next push starts at the front of the same array again.
// It is owned by the Run goroutine.
type fifo struct {
	buf  []Event
	head int // index of the oldest event in buf
}

func (q *fifo) len() int { return len(q.buf) - q.head }

func (q *fifo) push(ev Event) { q.buf = append(q.buf, ev) }

// pop removes and returns the oldest event.
func (q *fifo) pop() (Event, bool) {
	if q.head == len(q.buf) {
		return nil, false
	}
	ev := q.buf[q.head]
	q.buf[q.head] = nil
	q.head++
	if q.head == len(q.buf) {
		q.buf, q.head = q.buf[:0], 0
	}
	return ev, true
}

// pushFront puts evs, in order, before the events in q. q keeps evs' array.
func (q *fifo) pushFront(evs []Event) {
	q.buf, q.head = append(evs, q.buf[q.head:]...), 0
}

// swap makes q hold the events of buf (q must be empty) and returns q's
// empty array for reuse.
func (q *fifo) swap(buf []Event) []Event {
	old := q.buf[:0]
	q.buf, q.head = buf, 0
	return old
}

// take empties q and returns what it held.
func (q *fifo) take() []Event {
	evs := q.buf[q.head:]
	q.buf, q.head = nil, 0
	return evs
}
