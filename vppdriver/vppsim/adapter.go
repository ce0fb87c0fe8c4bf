package vppsim

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"go.fd.io/govpp/adapter"
	"go.fd.io/govpp/api"
	"go.fd.io/govpp/codec"
)

// ErrBrokenPipe is returned by SendMsg on a connection that was dropped by
// [VPP.Restart] or [VPP.Stop]; the text mirrors the socket client's.
var ErrBrokenPipe = errors.New("vppsim: write: broken pipe (VPP restarted)")

// ErrNotConnected is returned by SendMsg before Connect or after Disconnect.
var ErrNotConnected = errors.New("vppsim: not connected")

// ErrStopped is returned by Connect while the VPP is stopped.
var ErrStopped = errors.New("vppsim: connect: connection refused (VPP stopped)")

// Adapter is a GoVPP binary-API adapter connected to a [VPP]. It is safe
// for concurrent use. Create it with [VPP.NewAdapter].
type Adapter struct {
	vpp *VPP

	mu   sync.Mutex // guards cb and conn
	cb   adapter.MsgCallback
	conn *simConn
}

var _ adapter.VppAPI = (*Adapter)(nil)

type simConn struct {
	gen  uint64
	cb   adapter.MsgCallback
	q    chan simReq
	done chan struct{}
	wg   sync.WaitGroup
}

type simReq struct {
	context uint32
	msgID   uint16
	data    []byte
}

const queueLen = 8192

// Connect connects to the VPP and starts the reply goroutine.
func (a *Adapter) Connect() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.conn != nil {
		return errors.New("vppsim: already connected")
	}
	gen, ok := a.vpp.running()
	if !ok {
		return ErrStopped
	}
	c := &simConn{gen: gen, cb: a.cb, q: make(chan simReq, queueLen), done: make(chan struct{})}
	c.wg.Add(1)
	go a.vpp.serve(c)
	a.conn = c
	return nil
}

// Disconnect drops the connection and joins the reply goroutine.
func (a *Adapter) Disconnect() error {
	a.mu.Lock()
	c := a.conn
	a.conn = nil
	a.mu.Unlock()
	if c == nil {
		return nil
	}
	close(c.done)
	c.wg.Wait()
	return nil
}

// GetMsgID returns the message ID of a supported message, or an
// [*adapter.UnknownMsgError].
func (a *Adapter) GetMsgID(msgName string, msgCrc string) (uint16, error) {
	if id, ok := a.vpp.msgID(msgName, msgCrc); ok {
		return id, nil
	}
	return 0, &adapter.UnknownMsgError{MsgName: msgName, MsgCrc: msgCrc}
}

// SendMsg queues a request; its replies are delivered asynchronously to
// the callback.
func (a *Adapter) SendMsg(context uint32, data []byte) error {
	a.mu.Lock()
	c := a.conn
	a.mu.Unlock()
	if c == nil {
		return ErrNotConnected
	}
	if !a.vpp.alive(c.gen) {
		return ErrBrokenPipe
	}
	if len(data) < 10 {
		return fmt.Errorf("vppsim: message too short (%d bytes)", len(data))
	}
	r := simReq{context: context, msgID: binary.BigEndian.Uint16(data), data: data}
	select {
	case c.q <- r:
		return nil
	case <-c.done:
		return ErrNotConnected
	}
}

// SetMsgCallback sets the function that receives replies. It applies to
// connections made after the call.
func (a *Adapter) SetMsgCallback(cb adapter.MsgCallback) {
	a.mu.Lock()
	a.cb = cb
	a.mu.Unlock()
}

// WaitReady returns at once: the stand-in needs no socket.
func (a *Adapter) WaitReady() error { return nil }

// serve answers the requests of one connection in order.
func (v *VPP) serve(c *simConn) {
	defer c.wg.Done()
	for {
		select {
		case <-c.done:
			return
		case r := <-c.q:
			replies, id := v.process(c.gen, r.msgID, r.data)
			if id == 0 {
				continue // reply message hidden (Config.Hide)
			}
			for _, rep := range replies {
				id := id
				if n := rep.GetMessageName(); n != v.entries[id-idBase].name {
					// Another message than the request's reply (details):
					// the final reply of a *_get request.
					id, _ = v.msgID(n, rep.GetCrcString())
				}
				data, err := codec.DefaultCodec.EncodeMsg(rep, id)
				if err != nil {
					v.log.Error("encode reply", slog.String("msg", rep.GetMessageName()), slog.Any("error", err))
					continue
				}
				binary.BigEndian.PutUint32(data[2:6], r.context)
				if c.cb != nil {
					c.cb(id, data)
				}
			}
		}
	}
}

// process decodes and handles one request for connection generation gen.
// It returns nil (no reply) if the VPP restarted since the connection was
// made or the message is undecodable.
func (v *VPP) process(gen uint64, msgID uint16, data []byte) ([]api.Message, uint16) {
	e, ok := v.entryByID(msgID)
	if !ok || e.handle == nil {
		v.log.Warn("request with unknown message ID", slog.Int("id", int(msgID)))
		return nil, 0
	}
	req := e.newMsg()
	if err := codec.DefaultCodec.DecodeMsg(data, req); err != nil {
		v.log.Warn("undecodable request", slog.String("msg", req.GetMessageName()), slog.Any("error", err))
		return nil, 0
	}
	v.mu.Lock()
	icpt := v.interceptor
	v.mu.Unlock()
	if icpt != nil && e.newReply != nil {
		if retval, hit := icpt(req); hit {
			rep := e.newReply()
			setRetval(rep, retval)
			if !v.alive(gen) {
				return nil, 0
			}
			return []api.Message{rep}, e.replyID
		}
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.gen != gen || v.stopped {
		return nil, 0
	}
	v.stats.Requests++
	if !e.readOnly {
		v.stats.Writes++
	}
	return e.handle(v.st, req), e.replyID
}
