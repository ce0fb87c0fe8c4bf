package vppdrivertest_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppdrivertest"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppmodel"
)

func TestFakeDriver(t *testing.T) {
	var f vppdrivertest.FakeDriver
	lo := &vppmodel.Interface{Name: "lo", Type: vppmodel.Interface_LOOPBACK}
	vrf := &vppmodel.VrfTable{Id: 3}
	ctx := context.Background()

	_, err := f.Commit(ctx, &controller.Commit{Kind: controller.CommitResync,
		Values: controller.KeyValuePairs{vppmodel.InterfaceKey("lo"): lo, vppmodel.VrfTableKey(vppmodel.VrfTable_IPV4, 3): vrf}})
	require.NoError(t, err)
	assert.Len(t, f.State(), 2)

	_, err = f.Commit(ctx, &controller.Commit{Kind: controller.CommitUpdate,
		Values: controller.KeyValuePairs{vppmodel.VrfTableKey(vppmodel.VrfTable_IPV4, 3): nil}})
	require.NoError(t, err)
	assert.Nil(t, f.Get(vppmodel.VrfTableKey(vppmodel.VrfTable_IPV4, 3)))
	assert.Same(t, lo, f.Get(vppmodel.InterfaceKey("lo")))

	// Per key: the invalid value is rejected, the valid one applied, the
	// foreign key ignored.
	up := &vppmodel.Interface{Name: "up", Type: vppmodel.Interface_LOOPBACK}
	_, err = f.Commit(ctx, &controller.Commit{Kind: controller.CommitUpdate,
		Values: controller.KeyValuePairs{"vpp/interface/other": lo, vppmodel.InterfaceKey("up"): up, "nodesync/x": lo}})
	require.ErrorIs(t, err, vppdrivertest.ErrInvalid)
	assert.True(t, controller.IsPermanent(err))
	kes := controller.KeyErrors(err)
	require.Len(t, kes, 1)
	assert.Equal(t, "vpp/interface/other", kes[0].Key)
	assert.Len(t, f.State(), 2)
	assert.Same(t, up, f.Get(vppmodel.InterfaceKey("up")))
	assert.Contains(t, f.Rejected(), "vpp/interface/other")
	assert.True(t, f.OwnsKey("vpp/route/0/10.0.0.0/8"))
	assert.False(t, f.OwnsKey("nodesync/x"))
	_, err = f.Commit(ctx, &controller.Commit{Kind: controller.CommitUpdate,
		Values: controller.KeyValuePairs{"vpp/interface/other": nil, vppmodel.InterfaceKey("up"): nil}})
	require.NoError(t, err)
	assert.Empty(t, f.Rejected())
	assert.Len(t, f.State(), 1)

	boom := errors.New("boom")
	f.CommitHook = func(seq uint64, _ *controller.Commit) error {
		if seq == 5 {
			return boom
		}
		return nil
	}
	_, err = f.Commit(ctx, &controller.Commit{Kind: controller.CommitReapply})
	require.ErrorIs(t, err, boom)
	seq, err := f.Commit(ctx, &controller.Commit{Kind: controller.CommitReapply})
	require.NoError(t, err)
	assert.Equal(t, uint64(6), seq)
	assert.Equal(t, 1, f.Reapplies())
}

func ExampleFakeDriver() {
	var f vppdrivertest.FakeDriver
	_, err := f.Commit(context.Background(), &controller.Commit{Kind: controller.CommitUpdate,
		Values: controller.KeyValuePairs{vppmodel.InterfaceKey("uplink"): &vppmodel.Interface{Name: "uplink", Type: vppmodel.Interface_LOOPBACK}}})
	fmt.Println(err, len(f.State()), f.Commits())
	// Output: <nil> 1 1
}
