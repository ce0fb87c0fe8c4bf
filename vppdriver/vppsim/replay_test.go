package vppsim_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.fd.io/govpp/api"
	"go.fd.io/govpp/binapi/ethernet_types"
	interfaces "go.fd.io/govpp/binapi/interface"
	"go.fd.io/govpp/binapi/ip"
	"go.fd.io/govpp/binapi/ip_neighbor"
	"go.fd.io/govpp/binapi/l2"
	"go.fd.io/govpp/binapi/memclnt"
	"go.fd.io/govpp/binapi/memif"
	"go.fd.io/govpp/binapi/nat44_ed"
	"go.fd.io/govpp/core"

	memclnt26 "github.com/vswitchkit/vswitchkit/vppdriver/internal/binapi/memclnt"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppsim"
)

type traceMsg struct {
	Name string          `json:"name"`
	CRC  string          `json:"crc"`
	Data json.RawMessage `json:"data"`
}

type traceReply struct {
	Reply  *traceMsg `json:"reply"`
	Retval *int32    `json:"retval"`
}

type traceStep struct {
	Step     int          `json:"step"`
	Kind     string       `json:"kind"`
	Note     string       `json:"note"`
	Action   string       `json:"action"`
	Request  *traceMsg    `json:"request"`
	Requests []traceMsg   `json:"requests"`
	Reply    *traceMsg    `json:"reply"`
	Replies  []traceReply `json:"replies"`
	Details  []traceMsg   `json:"details"`
	Retval   *int32       `json:"retval"`
	Error    string       `json:"error"`
}

func loadTrace(t *testing.T, file string) []traceStep {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "vpp-traces", file))
	require.NoError(t, err)
	var steps []traceStep
	require.NoError(t, json.Unmarshal(b, &steps))
	return steps
}

// newMsg returns an empty binapi message registered under name_crc. A
// message registered in several binapi directories (control_ping is in
// GoVPP's and in vppdriver/internal/binapi) is taken from GoVPP's.
func newMsg(t *testing.T, m traceMsg) api.Message {
	t.Helper()
	reg := api.GetRegisteredMessages()
	dirs := slices.Sorted(maps.Keys(reg))
	dirs = slices.DeleteFunc(dirs, func(d string) bool { return d == stockBinapi })
	for _, dir := range append([]string{stockBinapi}, dirs...) {
		if proto, ok := reg[dir][m.Name+"_"+m.CRC]; ok {
			return reflect.New(reflect.TypeOf(proto).Elem()).Interface().(api.Message)
		}
	}
	t.Fatalf("message %s_%s is not registered", m.Name, m.CRC)
	return nil
}

const stockBinapi = "go.fd.io/govpp/binapi"

// pingFor returns the control_ping that ends a dump of req: GoVPP decodes a
// stream's replies with the registry of the binapi directory of the last
// message sent, so the ping must come from req's directory (see
// vppdriver/internal/binapi/README.md).
func pingFor(req api.Message) api.Message {
	dir := path.Dir(reflect.TypeOf(req).Elem().PkgPath())
	ping := &memclnt.ControlPing{}
	if p, ok := api.GetRegisteredMessages()[dir][ping.GetMessageName()+"_"+ping.GetCrcString()]; ok {
		return reflect.New(reflect.TypeOf(p).Elem()).Interface().(api.Message)
	}
	return ping
}

func decode(t *testing.T, m traceMsg) api.Message {
	t.Helper()
	msg := newMsg(t, m)
	require.NoError(t, json.Unmarshal(m.Data, msg), "decode %s", m.Name)
	return msg
}

// normalize clears the fields the README says change between runs (PIDs,
// MACs chosen by VPP), plus FIB stats indexes (see the package limits), and
// returns the JSON of msg.
//
// Bridge-domain IDs that VPP picked itself (add with bd_id ~0) are random
// in VPP; autoBD holds them (VPP's and the stand-in's) and they compare as 0.
func normalize(t *testing.T, msg api.Message, autoBD map[uint32]bool) string {
	t.Helper()
	switch m := msg.(type) {
	case *l2.BridgeDomainAddDelV2Reply:
		if autoBD[m.BdID] {
			m.BdID = 0
		}
	case *l2.BridgeDomainDetails:
		if autoBD[m.BdID] {
			m.BdID = 0
		}
		m.NSwIfs = 0
	case *nat44_ed.Nat44LbStaticMappingDetails:
		m.LocalNum = 0
	case *interfaces.SwInterfaceDetails:
		if m.InterfaceDevType == "VXLAN" && m.L2Address != (ethernet_types.MacAddress{}) {
			m.L2Address = ethernet_types.MacAddress{1} // random for L2 tunnels
		}
	case *memclnt.ControlPingReply:
		m.VpePID = 0
	case *memclnt26.ControlPingReply:
		m.VpePID = 0
	case *ip.IPRouteAddDelReply:
		m.StatsIndex = 0
	case *ip.IPRouteDetails:
		m.Route.StatsIndex = 0
		m.Route.NPaths = 0
	case *ip_neighbor.IPNeighborAddDelReply:
		m.StatsIndex = 0
	case *ip_neighbor.IPNeighborDetails:
		m.Age = 0
	}
	switch m := msg.(type) {
	case *interfaces.SwInterfaceDetails:
		if m.InterfaceDevType == "af-packet" || (m.InterfaceDevType == "memif" && randomMAC(m.L2Address)) {
			m.L2Address = ethernet_types.MacAddress{}
		}
	case *memif.MemifDetails:
		if randomMAC(m.HwAddr) {
			m.HwAddr = ethernet_types.MacAddress{}
		}
	}
	b, err := json.Marshal(msg)
	require.NoError(t, err)
	return msg.GetMessageName() + " " + string(b)
}

// randomMAC tells whether VPP chose the MAC (its random MACs are 02:fe:...;
// a MAC given in the request is kept as is).
func randomMAC(m ethernet_types.MacAddress) bool { return m[0] == 0x02 && m[1] == 0xfe }

var (
	vethRe  = regexp.MustCompile(`ip link add (\S+) type veth peer name (\S+)`)
	netnsRe = regexp.MustCompile(`ip netns add (\S+)`)
)

// TestReplayTraces replays every call, dump and pipeline step of the traces
// recorded on VPP 26.06 for the messages the stand-in implements and
// compares retvals, replies and dump contents.
func TestReplayTraces(t *testing.T) {
	for _, file := range []string{"1-interfaces.json", "2-af_packet.json", "3-routes_vrfs.json", "4-vxlan.json", "5-nat44_ed.json", "7-memif.json", "8-nat44_services.json", "9-unnumbered_neighbor.json", "10-acl.json", "11-cnat.json"} {
		t.Run(file, func(t *testing.T) {
			steps := loadTrace(t, file)
			var hosts, namespaces []string
			for _, s := range steps {
				if m := vethRe.FindStringSubmatch(s.Action); m != nil {
					hosts = append(hosts, m[1], m[2])
				}
				if m := netnsRe.FindStringSubmatch(s.Action); m != nil {
					namespaces = append(namespaces, m[1])
				}
			}
			vpp := vppsim.New(vppsim.Config{HostInterfaces: hosts, Namespaces: namespaces})
			conn, err := core.Connect(vpp.NewAdapter())
			require.NoError(t, err)
			defer conn.Disconnect()
			supported := map[string]bool{}
			for _, m := range vppsim.SupportedMessages() {
				supported[m.GetMessageName()] = true
			}
			replayed, skipped := 0, 0
			autoBD := map[uint32]bool{}
			for _, s := range steps {
				if s.Request != nil && !supported[s.Request.Name] {
					skipped++ // e.g. ip_route_lookup: not used by the driver, not implemented
					continue
				}
				name := fmt.Sprintf("step %d (%s)", s.Step, s.Note)
				switch s.Kind {
				case "call":
					replayCall(t, conn, name, s, autoBD)
				case "dump":
					replayDump(t, conn, name, s, autoBD)
				case "pipeline":
					replayPipeline(t, conn, name, s, autoBD)
				default:
					continue
				}
				replayed++
			}
			require.NotZero(t, replayed)
			t.Logf("%s: %d steps replayed, %d skipped (message not implemented)", file, replayed, skipped)
		})
	}
}

func newStream(t *testing.T, conn *core.Connection) api.Stream {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	st, err := conn.NewStream(ctx, core.WithReplySize(1024))
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	return st
}

func replayCall(t *testing.T, conn *core.Connection, name string, s traceStep, autoBD map[uint32]bool) {
	st := newStream(t, conn)
	req := decode(t, *s.Request)
	require.NoError(t, st.SendMsg(req), name)
	got, err := st.RecvMsg()
	require.NoError(t, err, name)
	want := decode(t, *s.Reply)
	if bd, ok := req.(*l2.BridgeDomainAddDelV2); ok && bd.IsAdd && bd.BdID == ^uint32(0) {
		autoBD[want.(*l2.BridgeDomainAddDelV2Reply).BdID] = true
		autoBD[got.(*l2.BridgeDomainAddDelV2Reply).BdID] = true
	}
	assert.Equal(t, normalize(t, want, autoBD), normalize(t, got, autoBD), name)
}

func replayDump(t *testing.T, conn *core.Connection, name string, s traceStep, autoBD map[uint32]bool) {
	st := newStream(t, conn)
	req := decode(t, *s.Request)
	require.NoError(t, st.SendMsg(req), name)
	require.NoError(t, st.SendMsg(pingFor(req)), name)
	got := []string{}
	for {
		m, err := st.RecvMsg()
		require.NoError(t, err, name)
		if m.GetMessageName() == "control_ping_reply" {
			break
		}
		got = append(got, normalize(t, m, autoBD))
	}
	want := make([]string, 0, len(s.Details))
	for _, d := range s.Details {
		want = append(want, normalize(t, decode(t, d), autoBD))
	}
	slices.Sort(got)
	slices.Sort(want)
	assert.Equal(t, want, got, name)
}

func replayPipeline(t *testing.T, conn *core.Connection, name string, s traceStep, autoBD map[uint32]bool) {
	st := newStream(t, conn)
	for _, r := range s.Requests {
		require.NoError(t, st.SendMsg(decode(t, r)), name)
	}
	for n, r := range s.Replies {
		got, err := st.RecvMsg()
		require.NoError(t, err, name)
		assert.Equal(t, normalize(t, decode(t, *r.Reply), autoBD), normalize(t, got, autoBD), "%s reply %d", name, n)
	}
}

// TestCrashTraceRefused replays 12-cnat_sessions_crashes.json part by part,
// each on a fresh stand-in: the calls VPP answered get the same replies, and
// the request that VPP died on (no reply within the deadline) gets
// vppsim.RetvalWouldCrash. Parts that need VPP's CLI (part A makes packets
// with the packet generator) are skipped; so are the requests after VPP
// died.
func TestCrashTraceRefused(t *testing.T) {
	steps := loadTrace(t, "12-cnat_sessions_crashes.json")
	var parts [][]traceStep
	for _, s := range steps {
		if s.Kind == "action" && strings.HasPrefix(s.Action, "part ") {
			parts = append(parts, nil)
		}
		parts[len(parts)-1] = append(parts[len(parts)-1], s)
	}
	refused := 0
	for _, part := range parts {
		t.Run(part[0].Action[:strings.Index(part[0].Action, ":")], func(t *testing.T) {
			if slices.ContainsFunc(part, func(s traceStep) bool { return strings.HasPrefix(s.Action, "vppctl:") }) {
				t.Skip("needs VPP's CLI (packets from the packet generator)")
			}
			vpp := vppsim.New(vppsim.Config{})
			conn, err := core.Connect(vpp.NewAdapter())
			require.NoError(t, err)
			defer conn.Disconnect()
			for _, s := range part {
				name := fmt.Sprintf("step %d (%s)", s.Step, s.Note)
				switch {
				case s.Kind != "call":
				case s.Reply != nil:
					replayCall(t, conn, name, s, nil)
				case strings.HasPrefix(s.Error, "RecvMsg:"):
					rep, err := invoke(t, conn, decode(t, *s.Request))
					require.NoError(t, err, name)
					assert.Equal(t, vppsim.RetvalWouldCrash, int32(reflect.ValueOf(rep).Elem().FieldByName("Retval").Int()), name)
					refused++
					return // VPP is dead: the rest of the part is its aftermath
				}
			}
			t.Fatal("no request of this part killed VPP")
		})
	}
	assert.Equal(t, 7, refused, "requests that killed VPP")
}
