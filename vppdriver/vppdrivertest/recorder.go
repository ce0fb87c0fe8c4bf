package vppdrivertest

import (
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"go.fd.io/govpp/adapter"
)

// RequestRecorder records the binary-API requests sent through the GoVPP
// adapters it wraps, in order and counted by message name: the VPP-side
// view of what a driver did, the same for the stand-in and a real VPP,
// without asking VPP. Wrap every adapter a driver connects with (e.g. in
// the function given to vppdriver.New); the records add up over all of
// them. The zero value is ready to use.
//
// RequestRecorder is safe for concurrent use.
type RequestRecorder struct {
	mu     sync.Mutex
	sent   []string          // guarded by mu; since the last Take
	counts map[string]uint64 // guarded by mu; since the start
}

// Wrap returns an adapter that forwards to a and records what is sent
// through it. A request whose name the connection never resolved (GetMsgID)
// is recorded as "message <id>".
func (r *RequestRecorder) Wrap(a adapter.VppAPI) adapter.VppAPI {
	return &recordingAdapter{VppAPI: a, rec: r, names: map[uint16]string{}}
}

// Take returns the request names recorded since the last Take, in order.
func (r *RequestRecorder) Take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.sent
	r.sent = nil
	return out
}

// Count returns the number of requests of the message name (e.g.
// "nat44_lb_static_mapping_add_del_local") sent so far.
func (r *RequestRecorder) Count(name string) uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.counts[name]
}

// Counts returns a copy of the counts by message name.
func (r *RequestRecorder) Counts() map[string]uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.counts)
}

// WriteCount returns the number of requests sent so far that may change
// VPP's state (see [ReadOnlyMessage]).
func (r *RequestRecorder) WriteCount() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var n uint64
	for name, k := range r.counts {
		if !ReadOnlyMessage(name) {
			n += k
		}
	}
	return n
}

func (r *RequestRecorder) add(name string) {
	r.mu.Lock()
	r.sent = append(r.sent, name)
	if r.counts == nil {
		r.counts = map[string]uint64{}
	}
	r.counts[name]++
	r.mu.Unlock()
}

// ReadOnlyMessage tells whether a binary-API request of that name only
// reads VPP's state: dumps, gets (cnat_get_snat_addresses,
// sw_interface_get_table, get_next_index, …), shows, control_ping.
func ReadOnlyMessage(name string) bool {
	return strings.HasSuffix(name, "_dump") || strings.HasSuffix(name, "_get") || strings.HasPrefix(name, "show_") ||
		strings.Contains(name, "_show_") || name == "control_ping" || strings.HasPrefix(name, "get_") ||
		strings.Contains(name, "_get_")
}

// Writes returns the names that may change VPP's state (see
// [ReadOnlyMessage]). The input is not modified.
func Writes(names []string) []string {
	return slices.DeleteFunc(slices.Clone(names), ReadOnlyMessage)
}

type recordingAdapter struct {
	adapter.VppAPI
	rec *RequestRecorder

	mu    sync.Mutex
	names map[uint16]string // guarded by mu: message IDs of this connection
}

func (a *recordingAdapter) GetMsgID(name, crc string) (uint16, error) {
	id, err := a.VppAPI.GetMsgID(name, crc)
	if err == nil {
		a.mu.Lock()
		a.names[id] = name
		a.mu.Unlock()
	}
	return id, err
}

func (a *recordingAdapter) SendMsg(context uint32, data []byte) error {
	if len(data) >= 2 {
		id := binary.BigEndian.Uint16(data)
		a.mu.Lock()
		name, ok := a.names[id]
		a.mu.Unlock()
		if !ok {
			name = fmt.Sprintf("message %d", id)
		}
		a.rec.add(name)
	}
	return a.VppAPI.SendMsg(context, data)
}
