package vppdrivertest

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"sync"

	"go.fd.io/govpp/adapter"

	"github.com/vswitchkit/vswitchkit/vppdriver/vppsim"
)

// RequestRecorder records the names of the binary-API requests sent
// through the GoVPP adapters it wraps: a test counts what a driver sent to
// a VPP (the stand-in or a real one) without asking the VPP. The zero value
// is ready to use; it is safe for concurrent use.
type RequestRecorder struct {
	mu   sync.Mutex
	sent []string
}

// Wrap returns an adapter that sends through a and records every request.
// Requests the stand-in does not know are recorded as "message <id>".
func (r *RequestRecorder) Wrap(a adapter.VppAPI) adapter.VppAPI {
	return &recordingAdapter{VppAPI: a, rec: r}
}

// Take returns the request names recorded since the last Take, in order.
func (r *RequestRecorder) Take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.sent
	r.sent = nil
	return out
}

func (r *RequestRecorder) add(name string) {
	r.mu.Lock()
	r.sent = append(r.sent, name)
	r.mu.Unlock()
}

// Writes returns the names that may change VPP's state: every request but
// dumps, control_ping and the read-only gets. The input is not modified.
func Writes(names []string) []string {
	return slices.DeleteFunc(slices.Clone(names), func(n string) bool {
		return strings.HasSuffix(n, "_dump") || n == "control_ping" || n == "sw_interface_get_table" ||
			n == "nat44_show_running_config" || n == "get_next_index"
	})
}

type recordingAdapter struct {
	adapter.VppAPI
	rec *RequestRecorder

	mu    sync.Mutex
	names map[uint16]string // message ID -> name; learnt on the first send
}

func (a *recordingAdapter) SendMsg(context uint32, data []byte) error {
	if len(data) >= 2 {
		id := binary.BigEndian.Uint16(data)
		a.mu.Lock()
		if a.names == nil {
			a.names = map[uint16]string{}
			for _, m := range vppsim.SupportedMessages() {
				if mid, err := a.GetMsgID(m.GetMessageName(), m.GetCrcString()); err == nil {
					a.names[mid] = m.GetMessageName()
				}
			}
		}
		name, ok := a.names[id]
		a.mu.Unlock()
		if !ok {
			name = fmt.Sprintf("message %d", id)
		}
		a.rec.add(name)
	}
	return a.VppAPI.SendMsg(context, data)
}
