package vppdriver_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.fd.io/govpp/api"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/vppdriver"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppmodel"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppsim"
)

func memifIf(name string, master bool, id uint32, sock string, ring uint32) *vppmodel.Interface {
	return &vppmodel.Interface{Name: name, Type: vppmodel.Interface_MEMIF, Enabled: true,
		Memif: &vppmodel.MemifLink{Master: master, Id: id, SocketFilename: sock, RingSize: ring, Secret: "s3cret"}}
}

// TestMemif: two masters share a new socket (registered once), a slave
// uses the default socket; a resync finds them configured although VPP
// reports running ring and buffer sizes, not the configured ones; a
// ring-size change re-creates the interface; a slave on the masters'
// socket is refused by VPP (one role per socket file) and retried.
func TestMemif(t *testing.T) {
	vpp := vppsim.New(vppsim.Config{})
	d := startDriver(t, vpp, testCfg())
	state := kv(t,
		memifIf("m1", true, 1, "/run/vpp/memif-a.sock", 0),
		memifIf("m2", true, 2, "/run/vpp/memif-a.sock", 2048),
		memifIf("m3", false, 1, "", 0),
	)
	commit(t, d, controller.CommitResync, state)
	waitConfigured(t, d, len(state))
	s := vpp.Snapshot()
	m1, ok := ifaceByTag(s, "vsk:m1")
	require.True(t, ok)
	assert.Equal(t, &vppsim.Memif{ID: 1, SocketFilename: "/run/vpp/memif-a.sock", Master: true, RingSize: 1024, BufferSize: 2048}, m1.Memif)
	m2, _ := ifaceByTag(s, "vsk:m2")
	assert.Equal(t, &vppsim.Memif{ID: 2, SocketFilename: "/run/vpp/memif-a.sock", Master: true, RingSize: 2048, BufferSize: 2048}, m2.Memif)
	m3, _ := ifaceByTag(s, "vsk:m3")
	assert.Equal(t, "/run/vpp/memif.sock", m3.Memif.SocketFilename)
	assert.Equal(t, "memif1013904223/1", m1.Name, "one socket registration for both; VPP's first socket ID")
	assert.Equal(t, "memif1013904223/2", m2.Name)

	before := vpp.Stats().Writes
	commit(t, d, controller.CommitResync, state)
	waitConfigured(t, d, len(state))
	assert.Equal(t, s, vpp.Snapshot())
	assert.Equal(t, before, vpp.Stats().Writes, "readback only")

	commit(t, d, controller.CommitUpdate, kv(t, memifIf("m1", true, 1, "/run/vpp/memif-a.sock", 4096)))
	waitConfigured(t, d, len(state))
	m1, _ = ifaceByTag(vpp.Snapshot(), "vsk:m1")
	assert.Equal(t, uint32(4096), m1.Memif.RingSize)
	assert.Equal(t, 1, countTag(vpp.Snapshot(), "vsk:m1"))

	commit(t, d, controller.CommitUpdate, kv(t, memifIf("m4", false, 4, "/run/vpp/memif-a.sock", 0)))
	require.Eventually(t, func() bool {
		s, _ := d.Status(vppmodel.InterfaceKey("m4"))
		return s.State == vppdriver.StateFailed
	}, 10*time.Second, time.Millisecond)
	st, _ := d.Status(vppmodel.InterfaceKey("m4"))
	assert.ErrorIs(t, st.Err, api.VPPApiError(-68))
	assert.True(t, vppdriver.IsRetriable(st.Err), "the masters may go")
}
