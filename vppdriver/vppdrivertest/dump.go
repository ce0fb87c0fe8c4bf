package vppdrivertest

import (
	"context"
	"fmt"

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
	conn, err := core.Connect(a)
	if err != nil {
		return nil, fmt.Errorf("connect to VPP: %w", err)
	}
	defer conn.Disconnect()
	st, err := conn.NewStream(ctx, core.WithReplySize(1024))
	if err != nil {
		return nil, err
	}
	defer func() { _ = st.Close() }()
	return DumpStream(st, req)
}

// DumpStream runs one dump on an open stream: the request, then a
// control_ping whose reply ends the details. Several dumps may run one
// after the other on one stream.
func DumpStream(st api.Stream, req api.Message) ([]api.Message, error) {
	if err := st.SendMsg(req); err != nil {
		return nil, err
	}
	if err := st.SendMsg(&memclnt.ControlPing{}); err != nil {
		return nil, err
	}
	var res []api.Message
	for {
		m, err := st.RecvMsg()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", req.GetMessageName(), err)
		}
		if _, ok := m.(*memclnt.ControlPingReply); ok {
			return res, nil
		}
		res = append(res, m)
	}
}
