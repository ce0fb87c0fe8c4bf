package vppdriver

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.fd.io/govpp/api"
	interfaces "go.fd.io/govpp/binapi/interface"
	"go.fd.io/govpp/binapi/interface_types"
	"go.fd.io/govpp/binapi/memclnt"
	"go.fd.io/govpp/core"

	"github.com/vswitchkit/vswitchkit/vppdriver/internal/binapi/cnat"
	vppmemclnt "github.com/vswitchkit/vswitchkit/vppdriver/internal/binapi/memclnt"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppsim"
)

// TestTransportBinapiDirs: GoVPP decodes a stream's replies with the
// registry of the binapi directory of the last message sent on it, so a
// pipeline and a batch of dumps that mix GoVPP's stock messages with the
// 26.06 cnat messages of internal/binapi must not have replies of both in
// flight at once: every reply comes back as its own type.
func TestTransportBinapiDirs(t *testing.T) {
	vpp := vppsim.New(vppsim.Config{})
	conn, err := core.Connect(vpp.NewAdapter())
	require.NoError(t, err)
	defer conn.Disconnect()
	cfg, err := Config{RequestTimeout: 2 * time.Second}.withDefaults()
	require.NoError(t, err)
	c := newClient(conn, cfg, &atomic.Uint64{})
	defer c.close()
	ctx := context.Background()

	var got []string
	var errs []error
	done := func(rep api.Message, err error) {
		got = append(got, rep.GetMessageName())
		errs = append(errs, err)
	}
	calls := []call{
		{req: &memclnt.ControlPing{}, done: done},
		{req: &interfaces.CreateLoopback{}, done: done},
		{req: &cnat.CnatGetSnatAddresses{}, done: done},
		{req: &vppmemclnt.ControlPing{}, done: done},
		{req: &memclnt.ControlPing{}, done: done},
	}
	require.NoError(t, c.pipeline(ctx, calls))
	assert.Equal(t, []string{"control_ping_reply", "create_loopback_reply", "cnat_get_snat_addresses_reply",
		"control_ping_reply", "control_ping_reply"}, got)
	var ve *VPPError
	require.ErrorAs(t, errs[2], &ve)
	assert.Equal(t, int32(-30), ve.Retval, "no SNAT entry")

	res, err := c.dumps(ctx, []api.Message{
		&interfaces.SwInterfaceDump{SwIfIndex: interface_types.InterfaceIndex(noIndex)},
		&cnat.CnatTranslationDump{},
		&cnat.CnatSnatAddressesDump{},
		&interfaces.SwInterfaceDump{SwIfIndex: interface_types.InterfaceIndex(noIndex)},
	})
	require.NoError(t, err)
	require.Len(t, res, 4)
	assert.Len(t, detailsOf[*interfaces.SwInterfaceDetails](res[0]), 2, "local0 and the loopback")
	assert.Empty(t, res[1])
	assert.Empty(t, res[2])
	assert.Len(t, detailsOf[*interfaces.SwInterfaceDetails](res[3]), 2)
}
