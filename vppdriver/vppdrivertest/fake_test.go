package vppdrivertest_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/vppdriver/model"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppdrivertest"
)

func TestFakeDriver(t *testing.T) {
	var f vppdrivertest.FakeDriver
	lo := &model.Interface{Name: "lo", Type: model.Interface_LOOPBACK}
	vrf := &model.VrfTable{Id: 3}
	ctx := context.Background()

	_, err := f.Commit(ctx, &controller.Commit{Kind: controller.CommitResync,
		Values: controller.KeyValuePairs{model.InterfaceKey("lo"): lo, model.VrfTableKey(model.VrfTable_IPV4, 3): vrf}})
	require.NoError(t, err)
	assert.Len(t, f.State(), 2)

	_, err = f.Commit(ctx, &controller.Commit{Kind: controller.CommitUpdate,
		Values: controller.KeyValuePairs{model.VrfTableKey(model.VrfTable_IPV4, 3): nil}})
	require.NoError(t, err)
	assert.Nil(t, f.Get(model.VrfTableKey(model.VrfTable_IPV4, 3)))
	assert.Same(t, lo, f.Get(model.InterfaceKey("lo")))

	_, err = f.Commit(ctx, &controller.Commit{Kind: controller.CommitUpdate,
		Values: controller.KeyValuePairs{"vpp/interface/other": lo}})
	require.ErrorIs(t, err, vppdrivertest.ErrInvalid)
	assert.Len(t, f.State(), 1, "failed commit changes nothing")

	boom := errors.New("boom")
	f.CommitHook = func(seq uint64, _ *controller.Commit) error {
		if seq == 4 {
			return boom
		}
		return nil
	}
	_, err = f.Commit(ctx, &controller.Commit{Kind: controller.CommitReapply})
	require.ErrorIs(t, err, boom)
	seq, err := f.Commit(ctx, &controller.Commit{Kind: controller.CommitReapply})
	require.NoError(t, err)
	assert.Equal(t, uint64(5), seq)
	assert.Equal(t, 1, f.Reapplies())
}

func ExampleFakeDriver() {
	var f vppdrivertest.FakeDriver
	_, err := f.Commit(context.Background(), &controller.Commit{Kind: controller.CommitUpdate,
		Values: controller.KeyValuePairs{model.InterfaceKey("uplink"): &model.Interface{Name: "uplink", Type: model.Interface_LOOPBACK}}})
	fmt.Println(err, len(f.State()), f.Commits())
	// Output: <nil> 1 1
}
