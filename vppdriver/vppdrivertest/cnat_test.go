package vppdrivertest_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.fd.io/govpp/adapter"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/vppdriver"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppdrivertest"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppmodel"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppsim"
)

// TestReadCnat applies cnat configuration with a driver and reads it back
// with ReadCnat.
func TestReadCnat(t *testing.T) {
	vpp := vppsim.New(vppsim.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	empty, err := vppdrivertest.ReadCnat(ctx, vpp.NewAdapter())
	require.NoError(t, err)
	assert.Equal(t, vppdrivertest.Cnat{}, empty)

	d, err := vppdriver.New(func() adapter.VppAPI { return vpp.NewAdapter() }, vppdriver.Config{})
	require.NoError(t, err)
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); assert.ErrorIs(t, d.Run(runCtx), context.Canceled) }()
	defer func() { stop(); wg.Wait() }()
	require.Eventually(t, d.Connected, 10*time.Second, time.Millisecond)

	values := controller.KeyValuePairs{}
	for _, m := range []*vppmodel.CnatTranslation{
		{Vip: "10.96.0.10", Port: 80, Protocol: vppmodel.ProtoTCP, Paths: []*vppmodel.CnatPath{{DstIp: "10.1.1.4", DstPort: 8080}, {DstIp: "10.1.1.3", DstPort: 8080}}},
		{Vip: "fd00:96::10", Port: 53, Protocol: vppmodel.ProtoUDP, LbType: vppmodel.CnatTranslation_MAGLEV,
			Paths: []*vppmodel.CnatPath{{DstIp: "fd00:1::2", DstPort: 5353}}},
	} {
		k, err := vppmodel.KeyOf(m)
		require.NoError(t, err)
		values[k] = m
	}
	values[vppmodel.CnatSnatKey] = &vppmodel.CnatSnat{Ip4: "192.168.16.1", Ip6: "fd00:16::1", NoClient: true}
	_, err = d.Commit(ctx, &controller.Commit{Kind: controller.CommitResync, Values: values})
	require.NoError(t, err)
	got, err := vppdrivertest.ReadCnat(ctx, vpp.NewAdapter())
	require.NoError(t, err)
	assert.Equal(t, vppdrivertest.Cnat{
		Translations: []string{"tcp 10.96.0.10:80 -> 10.1.1.3:8080 10.1.1.4:8080", "udp [fd00:96::10]:53 -> [fd00:1::2]:5353 maglev"},
		SNAT:         "192.168.16.1 fd00:16::1",
	}, got)
}
