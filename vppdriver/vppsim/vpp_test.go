package vppsim_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.fd.io/govpp/api"
	"go.fd.io/govpp/binapi/af_packet"
	"go.fd.io/govpp/binapi/avf"
	interfaces "go.fd.io/govpp/binapi/interface"
	"go.fd.io/govpp/binapi/memclnt"
	"go.fd.io/govpp/binapi/tapv2"
	"go.fd.io/govpp/core"

	"github.com/vswitchkit/vswitchkit/vppdriver/vppsim"
)

func invoke(t *testing.T, conn *core.Connection, req api.Message) (api.Message, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	st, err := conn.NewStream(ctx)
	require.NoError(t, err)
	defer func() { _ = st.Close() }()
	if err := st.SendMsg(req); err != nil {
		return nil, err
	}
	return st.RecvMsg()
}

// TestLifecycle follows 6-lifecycle.json: control_ping works, an unknown
// message fails in SendMsg with govpp's "unknown message" error, a killed
// VPP breaks the connection (SendMsg fails), and after a restart and
// reconnect all state is gone.
func TestLifecycle(t *testing.T) {
	vpp := vppsim.New(vppsim.Config{PID: 18696})
	conn, err := core.Connect(vpp.NewAdapter())
	require.NoError(t, err)

	rep, err := invoke(t, conn, &memclnt.ControlPing{})
	require.NoError(t, err)
	assert.Equal(t, uint32(18696), rep.(*memclnt.ControlPingReply).VpePID)

	_, err = invoke(t, conn, &avf.AvfCreate{})
	require.EqualError(t, err, "unknown message: avf_create_daab8ae2")

	rep, err = invoke(t, conn, &interfaces.CreateLoopback{})
	require.NoError(t, err)
	assert.Equal(t, uint32(1), uint32(rep.(*interfaces.CreateLoopbackReply).SwIfIndex))

	vpp.Stop()
	_, err = invoke(t, conn, &memclnt.ControlPing{})
	require.ErrorIs(t, err, vppsim.ErrBrokenPipe)
	conn.Disconnect()
	_, err = core.Connect(vpp.NewAdapter())
	require.ErrorIs(t, err, vppsim.ErrStopped)

	vpp.Start()
	conn, err = core.Connect(vpp.NewAdapter())
	require.NoError(t, err)
	defer conn.Disconnect()
	_, err = invoke(t, conn, &memclnt.ControlPing{})
	require.NoError(t, err)
	snap := vpp.Snapshot()
	require.Len(t, snap.Interfaces, 1)
	assert.Equal(t, "local0", snap.Interfaces[0].Name)
	assert.Equal(t, uint64(1), vpp.Stats().Restarts)
}

// TestRestartDropsInFlight: replies pending at a restart are never sent.
func TestRestartDropsInFlight(t *testing.T) {
	vpp := vppsim.New(vppsim.Config{})
	vpp.SetInterceptor(func(req api.Message) (int32, bool) {
		if _, ok := req.(*interfaces.CreateLoopback); ok {
			vpp.Restart()
		}
		return 0, false
	})
	conn, err := core.Connect(vpp.NewAdapter())
	require.NoError(t, err)
	defer conn.Disconnect()
	_, err = invoke(t, conn, &interfaces.CreateLoopback{})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	_, err = invoke(t, conn, &memclnt.ControlPing{})
	require.ErrorIs(t, err, vppsim.ErrBrokenPipe)
}

// TestInterceptorAndTap: injected retvals; tap creation needs VhostNet.
func TestInterceptorAndTap(t *testing.T) {
	tests := []struct {
		name     string
		vhostNet bool
		fail     int32
		want     int32
	}{
		{"no vhost-net", false, 0, -11},
		{"vhost-net", true, 0, 0},
		{"injected", true, -99, -99},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			vpp := vppsim.New(vppsim.Config{VhostNet: tc.vhostNet})
			if tc.fail != 0 {
				vpp.SetInterceptor(func(api.Message) (int32, bool) { return tc.fail, true })
			}
			conn, err := core.Connect(vpp.NewAdapter())
			require.NoError(t, err)
			defer conn.Disconnect()
			rep, err := invoke(t, conn, &tapv2.TapCreateV3{ID: ^uint32(0), NumRxQueues: 1, NumTxQueues: 1,
				RxRingSz: 256, TxRingSz: 256, HostIfNameSet: true, HostIfName: "vpp1"})
			require.NoError(t, err)
			assert.Equal(t, tc.want, rep.(*tapv2.TapCreateV3Reply).Retval)
			if tc.want == 0 {
				snap := vpp.Snapshot()
				require.Len(t, snap.Interfaces, 2)
				assert.Equal(t, "tap0", snap.Interfaces[1].Name)
				assert.Equal(t, "vpp1", snap.Interfaces[1].HostIfName)
			}
		})
	}
}

// TestHide makes a message unknown, as on a VPP without it.
func TestHide(t *testing.T) {
	vpp := vppsim.New(vppsim.Config{Hide: []string{"create_loopback"}})
	_, err := vpp.NewAdapter().GetMsgID("create_loopback", (&interfaces.CreateLoopback{}).GetCrcString())
	require.Error(t, err)
	_, err = vpp.NewAdapter().GetMsgID("delete_loopback", (&interfaces.DeleteLoopback{}).GetCrcString())
	require.NoError(t, err)
	_, err = vpp.NewAdapter().GetMsgID("delete_loopback", "00000000")
	require.Error(t, err, "another CRC is another message")
}

// TestHostInterfaceExists: af_packet attaches to host interfaces listed in
// Config.HostInterfaces or known to Config.HostInterfaceExists, and to no
// other (-71, VNET_API_ERROR_INVALID_INTERFACE, as VPP answers).
func TestHostInterfaceExists(t *testing.T) {
	hosts := map[string]bool{"veth-a": true}
	vpp := vppsim.New(vppsim.Config{HostInterfaces: []string{"eth1"}, HostInterfaceExists: func(name string) bool { return hosts[name] }})
	conn, err := core.Connect(vpp.NewAdapter())
	require.NoError(t, err)
	defer conn.Disconnect()
	for _, tc := range []struct {
		host   string
		retval int32
	}{{"eth1", 0}, {"veth-a", 0}, {"veth-b", -71}} {
		rep, err := invoke(t, conn, &af_packet.AfPacketCreateV3{Mode: af_packet.AF_PACKET_API_MODE_ETHERNET,
			HostIfName: tc.host, UseRandomHwAddr: true, NumRxQueues: 1, NumTxQueues: 1})
		require.NoError(t, err, tc.host)
		assert.Equal(t, tc.retval, rep.(*af_packet.AfPacketCreateV3Reply).Retval, tc.host)
	}
}
