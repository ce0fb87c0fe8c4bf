package vppdrivertest

import (
	"encoding/binary"
	"maps"
	"strings"
	"sync"

	"go.fd.io/govpp/adapter"
)

// RequestCounter counts the binary-API requests sent through the GoVPP
// adapters it wraps, by message name: the VPP-side view of what a driver
// did, the same for the stand-in and a real VPP. Wrap every adapter a
// driver connects with (e.g. in the function given to vppdriver.New); the
// counts add up over all of them. The zero value is ready to use.
//
// RequestCounter is safe for concurrent use.
type RequestCounter struct {
	mu     sync.Mutex
	counts map[string]uint64 // guarded by mu
}

// Wrap returns an adapter that forwards to a and counts what is sent
// through it.
func (c *RequestCounter) Wrap(a adapter.VppAPI) adapter.VppAPI {
	return &countingAdapter{VppAPI: a, c: c, names: map[uint16]string{}}
}

// Count returns the number of requests of the message name (e.g.
// "nat44_lb_static_mapping_add_del_local") sent so far.
func (c *RequestCounter) Count(name string) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts[name]
}

// Counts returns a copy of the counts by message name.
func (c *RequestCounter) Counts() map[string]uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.counts)
}

// Writes returns the number of requests sent so far that may change VPP's
// state: every request but dumps, *_get requests, show requests,
// sw_interface_get_table and control_ping.
func (c *RequestCounter) Writes() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var n uint64
	for name, k := range c.counts {
		if !ReadOnlyMessage(name) {
			n += k
		}
	}
	return n
}

// ReadOnlyMessage tells whether a binary-API request of that name only
// reads VPP's state (dumps, gets, shows, control_ping).
func ReadOnlyMessage(name string) bool {
	return strings.HasSuffix(name, "_dump") || strings.HasSuffix(name, "_get") || strings.HasPrefix(name, "show_") ||
		strings.Contains(name, "_show_") || name == "control_ping" || name == "sw_interface_get_table"
}

type countingAdapter struct {
	adapter.VppAPI
	c *RequestCounter

	mu    sync.Mutex
	names map[uint16]string // guarded by mu: message IDs of this connection
}

func (a *countingAdapter) GetMsgID(name, crc string) (uint16, error) {
	id, err := a.VppAPI.GetMsgID(name, crc)
	if err == nil {
		a.mu.Lock()
		a.names[id] = name
		a.mu.Unlock()
	}
	return id, err
}

func (a *countingAdapter) SendMsg(context uint32, data []byte) error {
	if len(data) >= 2 {
		a.mu.Lock()
		name, ok := a.names[binary.BigEndian.Uint16(data)]
		a.mu.Unlock()
		if ok {
			a.c.mu.Lock()
			if a.c.counts == nil {
				a.c.counts = map[string]uint64{}
			}
			a.c.counts[name]++
			a.c.mu.Unlock()
		}
	}
	return a.VppAPI.SendMsg(context, data)
}
