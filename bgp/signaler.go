package bgp

// Signaler multiplexes multiple event sources into a single level-triggered
// event.
//
// Signaler should always be constructed with [NewSignaler], which gives it a
// channel of capacity 1. The zero Signaler drops every event.
//
// Use of a Signaler allows for bursts of events to be "rolled up". This is a
// suitable approach since the [Controller] checks the entire state of the
// world on each iteration of its control loop. Additionally, this precludes
// any need for ordering between different event sources.
//
// Signaler is safe for concurrent use.
type Signaler struct {
	Sig chan struct{}
}

// NewSignaler returns a Signaler whose channel has capacity 1.
func NewSignaler() Signaler { return Signaler{Sig: make(chan struct{}, 1)} }

// Event adds an edge-triggered event to the Signaler. It never blocks: when a
// signal is already pending, the event is rolled up into it.
//
// A controller which uses this Signaler will be notified of this event some
// time after. The argument is ignored; the signature suits event callbacks.
func (s Signaler) Event(_ any) {
	select {
	case s.Sig <- struct{}{}:
	default:
	}
}
