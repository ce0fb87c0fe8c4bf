package ipam

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
)

// TestErrorsNameThePackageOnce: the errors IPAM returns start with "ipam: "
// once (CONTRIBUTING R8), whatever sentinel they wrap.
func TestErrorsNameThePackageOnce(t *testing.T) {
	lay, err := resolveConfig(Config{})
	if err != nil {
		t.Fatal(err)
	}
	i := &IPAM{lay: lay, nodeName: "n1", byPod: map[kubemodel.PodID]uint64{}}
	pod := kubemodel.PodID{Namespace: "default", Name: "web"}
	_, notReady := i.allocate(context.Background(), pod, "", "", "")
	_, badPod := i.allocate(context.Background(), kubemodel.PodID{Namespace: "default"}, "", "", "")
	_, badData := i.allocate(context.Background(), pod, "", "ext", "not an address")
	for _, err := range []error{notReady, badPod, badData} {
		assert.True(t, strings.HasPrefix(err.Error(), "ipam: "), "%v", err)
		assert.Equal(t, 1, strings.Count(err.Error(), "ipam: "), "%v", err)
	}
	assert.EqualError(t, notReady, "ipam: this node's ID or pod CIDR is not known yet: allocate pod IP for default/web: no successful resync yet (this node's ID is not known)")
}
