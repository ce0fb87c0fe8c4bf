package vppsim_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.fd.io/govpp/adapter/socketclient"
	"go.fd.io/govpp/api"
	interfaces "go.fd.io/govpp/binapi/interface"
	"go.fd.io/govpp/binapi/interface_types"
	"go.fd.io/govpp/binapi/memif"
	"go.fd.io/govpp/core"

	"github.com/vswitchkit/vswitchkit/vppdriver/vppdrivertest"
)

// recorder writes a trace in the format of testdata/vpp-traces (see its
// README): one call or dump per step, on a fresh stream.
type recorder struct {
	t        *testing.T
	conn     *core.Connection
	scenario string
	steps    []map[string]any
}

func traceOf(m api.Message) map[string]any {
	return map[string]any{"name": m.GetMessageName(), "crc": m.GetCrcString(), "data": m}
}

func (r *recorder) step(s map[string]any) {
	s["scenario"], s["step"] = r.scenario, len(r.steps)+1
	r.steps = append(r.steps, s)
}

func (r *recorder) call(note string, req api.Message) api.Message {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := r.conn.NewStream(ctx)
	require.NoError(r.t, err)
	defer func() { _ = st.Close() }()
	require.NoError(r.t, st.SendMsg(req))
	rep, err := st.RecvMsg()
	require.NoError(r.t, err)
	s := map[string]any{"kind": "call", "note": note, "request": traceOf(req), "reply": traceOf(rep)}
	rv := reflectRetval(rep)
	s["retval"] = rv
	if rv != 0 {
		s["retval_error"] = api.VPPApiError(rv).Error()
	}
	r.step(s)
	return rep
}

// dump sends req and then a control_ping of the same binapi directory (see
// pingFor) on one stream, reads until the ping's reply and returns the
// details.
func (r *recorder) dump(note string, req api.Message) []api.Message {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := r.conn.NewStream(ctx, core.WithReplySize(1024))
	require.NoError(r.t, err)
	defer func() { _ = st.Close() }()
	require.NoError(r.t, st.SendMsg(req))
	require.NoError(r.t, st.SendMsg(pingFor(req)))
	details := []any{}
	var out []api.Message
	for {
		m, err := st.RecvMsg()
		require.NoError(r.t, err)
		if m.GetMessageName() == "control_ping_reply" {
			r.step(map[string]any{"kind": "dump", "note": note, "request": traceOf(req), "details": details,
				"reply": traceOf(m), "retval": reflectRetval(m)})
			return out
		}
		details = append(details, traceOf(m))
		out = append(out, m)
	}
}

// try is call for a request that may get no reply (it makes VPP die): the
// step records the error instead of failing the test.
func (r *recorder) try(note string, req api.Message) api.Message {
	r.t.Helper()
	s := map[string]any{"kind": "call", "note": note, "request": traceOf(req)}
	r.step(s)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := r.conn.NewStream(ctx)
	require.NoError(r.t, err)
	defer func() { _ = st.Close() }()
	if err := st.SendMsg(req); err != nil {
		s["error"] = "SendMsg: " + err.Error()
		return nil
	}
	rep, err := st.RecvMsg()
	if err != nil {
		s["error"] = "RecvMsg: " + err.Error()
		return nil
	}
	s["reply"], s["retval"] = traceOf(rep), reflectRetval(rep)
	if rv := reflectRetval(rep); rv != 0 {
		s["retval_error"] = api.VPPApiError(rv).Error()
	}
	return rep
}

// pipeline sends all reqs on one stream before it reads any reply.
func (r *recorder) pipeline(note string, reqs []api.Message) []api.Message {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := r.conn.NewStream(ctx, core.WithRequestSize(len(reqs)+1), core.WithReplySize(len(reqs)+1))
	require.NoError(r.t, err)
	defer func() { _ = st.Close() }()
	requests := make([]any, 0, len(reqs))
	for _, q := range reqs {
		requests = append(requests, traceOf(q))
		require.NoError(r.t, st.SendMsg(q))
	}
	replies := make([]any, 0, len(reqs))
	var out []api.Message
	for range reqs {
		m, err := st.RecvMsg()
		require.NoError(r.t, err)
		rep := map[string]any{"reply": traceOf(m), "retval": reflectRetval(m)}
		if rv := reflectRetval(m); rv != 0 {
			rep["retval_error"] = api.VPPApiError(rv).Error()
		}
		replies = append(replies, rep)
		out = append(out, m)
	}
	r.step(map[string]any{"kind": "pipeline", "note": note, "requests": requests, "replies": replies})
	return out
}

// action records a step outside the API.
func (r *recorder) action(text string) {
	r.step(map[string]any{"kind": "action", "action": text})
}

// cli runs a VPP CLI command and records its output (facts the API does not
// show, for the reader; the replay skips actions).
func (r *recorder) cli(vpp *vppdrivertest.RealVPP, args ...string) string {
	r.t.Helper()
	out := vpp.CLI(args...)
	r.step(map[string]any{"kind": "action", "action": "vppctl: " + strings.Join(args, " "), "exit_code": 0, "output": out})
	return out
}

// write writes the steps to testdata/vpp-traces/file, with dir (the real
// VPP's directory, a temporary path) written as DIR.
func (r *recorder) write(file, dir string) {
	r.t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	require.NoError(r.t, enc.Encode(r.steps))
	path := filepath.Join("testdata", "vpp-traces", file)
	require.NoError(r.t, os.WriteFile(path, bytes.ReplaceAll(buf.Bytes(), []byte(dir), []byte("DIR")), 0o644))
	r.t.Logf("wrote %s: %d steps", path, len(r.steps))
}

func reflectRetval(m api.Message) int32 {
	b, _ := json.Marshal(m)
	var v struct {
		Retval int32 `json:"retval"`
	}
	_ = json.Unmarshal(b, &v)
	return v.Retval
}

// TestRecordMemifTrace records testdata/vpp-traces/7-memif.json from a
// real VPP (see package vppdrivertest for VPP_SH). It runs only with
// VPPSIM_RECORD=1: the file is an input of TestReplayTraces, rewritten on
// purpose only.
func TestRecordMemifTrace(t *testing.T) {
	if os.Getenv("VPPSIM_RECORD") != "1" {
		t.Skip("set VPPSIM_RECORD=1 (and VPP_SH) to record the memif trace from a real VPP")
	}
	vpp := vppdrivertest.StartRealVPP(t)
	conn, err := core.Connect(socketclient.NewVppClient(vpp.APISocket()))
	require.NoError(t, err)
	defer conn.Disconnect()
	r := &recorder{t: t, conn: conn, scenario: "memif"}
	r.step(map[string]any{"kind": "action", "action": "start fresh VPP (no prior configuration); govpp core.Connect(socketclient) to the binary-API socket"})

	dir := vpp.Dir() // master sockets are created as files: in the test's directory
	sock := func(name string) string { return filepath.Join(dir, "trace-memif-"+name+".sock") }
	sockA, sockB := sock("a"), sock("b")
	addSock := func(note string, id uint32, file string) uint32 {
		rep := r.call(note, &memif.MemifSocketFilenameAddDelV2{IsAdd: true, SocketID: id, SocketFilename: file})
		return rep.(*memif.MemifSocketFilenameAddDelV2Reply).SocketID
	}
	delSock := func(note string, id uint32) {
		r.call(note, &memif.MemifSocketFilenameAddDelV2{SocketID: id})
	}
	create := func(note string, sock, id uint32, master bool, ring uint32, buf uint16, mac [6]byte) uint32 {
		role := memif.MEMIF_ROLE_API_SLAVE
		if master {
			role = memif.MEMIF_ROLE_API_MASTER
		}
		rep := r.call(note, &memif.MemifCreateV2{Role: role, Mode: memif.MEMIF_MODE_API_ETHERNET, RxQueues: 1, TxQueues: 1,
			ID: id, SocketID: sock, RingSize: ring, BufferSize: buf, HwAddr: mac, Secret: "s3cret"})
		return uint32(rep.(*memif.MemifCreateV2Reply).SwIfIndex)
	}
	dumps := func(when string) {
		r.dump("memif_socket_filename_dump "+when, &memif.MemifSocketFilenameDump{})
		r.dump("memif_dump "+when, &memif.MemifDump{})
		r.dump("sw_interface_dump "+when, &interfaces.SwInterfaceDump{SwIfIndex: interface_types.InterfaceIndex(^uint32(0))})
	}

	dumps("on a fresh VPP")
	a := addSock("add socket filename A with socket_id ~0 (VPP picks the ID)", ^uint32(0), sockA)
	b := addSock("add socket filename B with socket_id ~0", ^uint32(0), sockB)
	addSock("add socket filename C with socket_id 7", 7, sock("c"))
	addSock("add socket filename D with socket_id 7 again (duplicate ID)", 7, sock("d"))
	addSock("add socket filename A again with socket_id ~0 (same file, new ID)", ^uint32(0), sockA)
	addSock("add a socket filename with socket_id 0 (the default socket)", 0, sock("e"))
	addSock("add an empty socket filename with socket_id ~0", ^uint32(0), "")
	addSock("add socket filename F with socket_id ~0 (after the failed add)", ^uint32(0), sock("f"))
	delSock("delete socket_id 12 (never existed)", 12)
	delSock("delete socket_id 0 (the default socket)", 0)

	m1 := create("memif_create_v2 master id 1 on socket A (ring 0, buffer 0: defaults)", a, 1, true, 0, 0, [6]byte{})
	create("memif_create_v2 master id 1 on socket A again (duplicate)", a, 1, true, 0, 0, [6]byte{})
	create("memif_create_v2 slave id 2 on socket A (A already has a master)", a, 2, false, 0, 0, [6]byte{})
	m2 := create("memif_create_v2 master id 2 on socket A, ring 2048, buffer 4096, MAC 02:00:00:00:00:02", a, 2, true, 2048, 4096, [6]byte{2, 0, 0, 0, 0, 2})
	s0 := create("memif_create_v2 slave id 1 on the default socket 0", 0, 1, false, 0, 0, [6]byte{})
	create("memif_create_v2 master id 3 on the default socket 0 (it has a slave)", 0, 3, true, 0, 0, [6]byte{})
	create("memif_create_v2 on socket_id 9 (does not exist)", 9, 1, false, 0, 0, [6]byte{})
	create("memif_create_v2 with ring size 1000 (not a power of 2) on socket B", b, 1, false, 1000, 0, [6]byte{})
	delSock("delete socket A while it has interfaces", a)
	dumps("with interfaces")

	r.call("memif_delete master id 1 on socket A", &memif.MemifDelete{SwIfIndex: interface_types.InterfaceIndex(m1)})
	r.call("memif_delete master id 1 again", &memif.MemifDelete{SwIfIndex: interface_types.InterfaceIndex(m1)})
	create("memif_create_v2 slave id 3 on socket A (it still has a master)", a, 3, false, 0, 0, [6]byte{})
	r.call("memif_delete master id 2 on socket A", &memif.MemifDelete{SwIfIndex: interface_types.InterfaceIndex(m2)})
	create("memif_create_v2 slave id 3 on socket A (no interface left on it)", a, 3, false, 0, 0, [6]byte{})
	r.call("memif_delete slave id 1 on socket 0", &memif.MemifDelete{SwIfIndex: interface_types.InterfaceIndex(s0)})
	delSock("delete socket B (no interfaces)", b)
	delSock("delete socket B again", b)
	dumps("at the end")

	out, err := json.MarshalIndent(r.steps, "", "  ")
	require.NoError(t, err)
	file := filepath.Join("testdata", "vpp-traces", "7-memif.json")
	require.NoError(t, os.WriteFile(file, append(out, '\n'), 0o644))
	t.Logf("wrote %s: %d steps", file, len(r.steps))
	fmt.Fprintln(os.Stderr, vpp.CLI("show", "version"))
}
