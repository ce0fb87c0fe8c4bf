package vppdrivertest

import (
	"context"
	"fmt"
	"path"
	"reflect"

	"go.fd.io/govpp/adapter"
	"go.fd.io/govpp/api"
	"go.fd.io/govpp/binapi/memclnt"
	"go.fd.io/govpp/core"
)

// Dump connects to a VPP (a stand-in's or a real VPP's adapter), runs one
// dump request and returns its details, read until the control_ping reply
// that follows them. It disconnects before it returns. ctx bounds the
// whole dump.
func Dump(ctx context.Context, a adapter.VppAPI, req api.Message) ([]api.Message, error) {
	d, err := NewDumper(ctx, a)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return d.Dump(req)
}

// A Dumper runs dumps one after the other on a connection of its own, for
// tests that read several of VPP's tables at once.
type Dumper struct {
	conn *core.Connection
	st   api.Stream
}

// NewDumper connects to a VPP through a. ctx bounds every dump the Dumper
// runs; Close disconnects.
func NewDumper(ctx context.Context, a adapter.VppAPI) (*Dumper, error) {
	conn, err := core.Connect(a)
	if err != nil {
		return nil, fmt.Errorf("connect to VPP: %w", err)
	}
	st, err := conn.NewStream(ctx, core.WithReplySize(1024))
	if err != nil {
		conn.Disconnect()
		return nil, err
	}
	return &Dumper{conn: conn, st: st}, nil
}

// Dump runs one dump request and returns its details.
func (d *Dumper) Dump(req api.Message) ([]api.Message, error) { return DumpStream(d.st, req) }

// Close closes the stream and disconnects.
func (d *Dumper) Close() {
	_ = d.st.Close()
	d.conn.Disconnect()
}

// DumpStream runs one dump on an open stream: the request, then a
// control_ping whose reply ends the details. Several dumps may run one
// after the other on one stream. The control_ping is the one of the
// request's binapi directory (GoVPP decodes a stream's replies with the
// registry of the last message sent): GoVPP's stock one, or that of a
// binapi generated elsewhere, such as the VPP 26.06 cnat messages of
// vppdriver/internal/binapi.
func DumpStream(st api.Stream, req api.Message) ([]api.Message, error) {
	if err := st.SendMsg(req); err != nil {
		return nil, err
	}
	if err := st.SendMsg(pingOf(req)); err != nil {
		return nil, err
	}
	var res []api.Message
	for {
		m, err := st.RecvMsg()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", req.GetMessageName(), err)
		}
		if m.GetMessageName() == "control_ping_reply" {
			return res, nil
		}
		res = append(res, m)
	}
}

// pingOf returns a control_ping of the binapi directory of req (GoVPP's
// stock one if that directory has none).
func pingOf(req api.Message) api.Message {
	dir := path.Dir(reflect.TypeOf(req).Elem().PkgPath())
	for _, m := range api.GetRegisteredMessages()[dir] {
		if m.GetMessageName() == "control_ping" {
			return reflect.New(reflect.TypeOf(m).Elem()).Interface().(api.Message)
		}
	}
	return &memclnt.ControlPing{}
}
