package podconn_test

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/controller/podiface"
	"github.com/vswitchkit/vswitchkit/ipam"
	"github.com/vswitchkit/vswitchkit/ipam/ipamtest"
	"github.com/vswitchkit/vswitchkit/nodesync/nodesynctest"
	"github.com/vswitchkit/vswitchkit/render/internal/rendertest"
	"github.com/vswitchkit/vswitchkit/render/podconn"
	"github.com/vswitchkit/vswitchkit/svcprocessor"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppdrivertest"
)

func TestConfig(t *testing.T) {
	addrs, err := ipam.New(ipamtest.NewNodeID(1), ipam.Config{})
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		cfg  podconn.Config
		ok   bool
	}{
		{"zero value", podconn.Config{}, true},
		{"memif default", podconn.Config{InterfaceType: podiface.Memif}, true},
		{"unknown type", podconn.Config{InterfaceType: "veth"}, false},
		{"bad gateway name", podconn.Config{GatewayName: "a/b"}, false},
		{"relative memif dir", podconn.Config{MemifSocketDir: "run/vpp"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := podconn.New(addrs, tc.cfg)
			if tc.ok {
				require.NoError(t, err)
			} else {
				require.Error(t, err)
			}
		})
	}
	_, err = podconn.New(nil, podconn.Config{})
	require.Error(t, err)
}

// TestInterfaceType: the AddPod's type wins, then the pod's annotation
// (also when it changes later), then Config.InterfaceType.
func TestInterfaceType(t *testing.T) {
	e := simEnv(t)
	annotated := func(i int, typ string) *kubemodel.Pod {
		return &kubemodel.Pod{Namespace: "default", Name: podID(i).Name,
			Annotations: map[string]string{podiface.TypeAnnotation: typ}}
	}
	kube := controller.NewKubeStateData()
	kube[kubemodel.PodResource] = controller.KeyValuePairs{kubemodel.PodKey("default", "pod1"): annotated(1, "memif")}
	a := rendertest.Start(t, rendertest.Options{Name: "node-1", DB: nodesynctest.NewMemDB(), NewAdapter: e.newAdapter,
		KubeState: kube, PodConn: podconn.Config{InterfaceType: podiface.Tap}})

	typeOf := func(ev *controller.AddPod) podiface.Type {
		require.NoError(t, a.AddPod(t, ev))
		require.Len(t, ev.Interfaces, 1)
		return ev.Interfaces[0].Type
	}
	assert.Equal(t, podiface.Memif, typeOfPod(t, a.Pods, podID(1)), "the pod server asks before ADD")
	assert.Equal(t, podiface.Tap, typeOfPod(t, a.Pods, podID(0)), "no annotation: Config")
	assert.Equal(t, podiface.Tap, typeOf(addPodEvent(e, 0, podiface.Default)), "Config")
	assert.Equal(t, podiface.Memif, typeOf(addPodEvent(e, 1, podiface.Default)), "annotation")
	assert.Equal(t, podiface.AfPacket, typeOf(addPodEvent(e, 2, podiface.AfPacket)), "event")

	ch := &controller.KubeStateChange{Key: kubemodel.PodKey("default", "pod3"), Resource: kubemodel.PodResource,
		NewValue: annotated(3, "af_packet")}
	require.NoError(t, a.Loop.PushEvent(ch))
	a.Sync(t)
	assert.Equal(t, podiface.AfPacket, typeOfPod(t, a.Pods, podID(3)))
	assert.Equal(t, podiface.AfPacket, typeOf(addPodEvent(e, 3, podiface.Default)), "annotation added later")
	a.WaitConfigured(t)
	assert.Len(t, a.Pods.Pods(), 4)
}

func typeOfPod(t *testing.T, h *podconn.Handler, pod kubemodel.PodID) podiface.Type {
	t.Helper()
	typ, err := h.InterfaceTypeOf(pod)
	require.NoError(t, err)
	return typ
}

// TestUnknownInterfaceTypeAnnotation (issue 27, item 5): a pod whose
// annotation asks for an interface type that does not exist is not given
// another type: InterfaceTypeOf (which the pod server asks before ADD)
// and its AddPod fail with an error naming the annotation and the value.
// The annotation is logged at Warn once per pod and value. A pod attached
// before its annotation went bad stays attached through resyncs.
func TestUnknownInterfaceTypeAnnotation(t *testing.T) {
	e := simEnv(t)
	annotated := func(i int, typ string) *kubemodel.Pod {
		return &kubemodel.Pod{Namespace: "default", Name: podID(i).Name,
			Annotations: map[string]string{podiface.TypeAnnotation: typ}}
	}
	kube := controller.NewKubeStateData()
	kube[kubemodel.PodResource] = controller.KeyValuePairs{kubemodel.PodKey("default", "pod1"): annotated(1, "carrier-pigeon")}
	logs := &rendertest.LogBuffer{}
	a := rendertest.Start(t, rendertest.Options{Name: "node-1", DB: nodesynctest.NewMemDB(), NewAdapter: e.newAdapter,
		KubeState: kube, PodConn: podconn.Config{InterfaceType: podiface.Tap, Logger: logs.Logger()}})

	const want = `podconn: pod default/pod1: annotation vswitchkit.io/pod-interface-type="carrier-pigeon" is not an interface type (want tap, af_packet or memif)`
	_, err := a.Pods.InterfaceTypeOf(podID(1))
	require.EqualError(t, err, want)
	var aerr *podconn.AnnotationError
	require.ErrorAs(t, err, &aerr)
	assert.Equal(t, podconn.AnnotationError{Pod: podID(1), Value: "carrier-pigeon"}, *aerr)
	assert.ErrorIs(t, err, podconn.ErrBadRequest)

	err = a.AddPod(t, addPodEvent(e, 1, podiface.Default))
	require.ErrorAs(t, err, &aerr, "the ADD fails rather than give the pod another type")
	assert.ErrorContains(t, err, want)
	_, ok := a.Pods.PodInterface(podID(1))
	assert.False(t, ok)
	_, ok = a.IPAM.PodAddr(podID(1))
	assert.False(t, ok, "IPAM took the address back")

	// Another change of the pod with the same value, and a resync: no
	// second warning. A new bad value: one more.
	require.NoError(t, a.Loop.PushEvent(&controller.KubeStateChange{Key: kubemodel.PodKey("default", "pod1"),
		Resource: kubemodel.PodResource, PrevValue: annotated(1, "carrier-pigeon"), NewValue: annotated(1, "carrier-pigeon")}))
	a.Sync(t)
	a.Resync(t, kube)
	assert.Equal(t, 1, strings.Count(logs.String(), "level=WARN"), logs.String())
	assert.Contains(t, logs.String(), `pod=default/pod1`)
	assert.Contains(t, logs.String(), `value=carrier-pigeon`)
	require.NoError(t, a.Loop.PushEvent(&controller.KubeStateChange{Key: kubemodel.PodKey("default", "pod1"),
		Resource: kubemodel.PodResource, PrevValue: annotated(1, "carrier-pigeon"), NewValue: annotated(1, "pigeon")}))
	a.Sync(t)
	assert.Equal(t, 2, strings.Count(logs.String(), "level=WARN"))

	// Fixed: the pod gets what it asks for.
	require.NoError(t, a.Loop.PushEvent(&controller.KubeStateChange{Key: kubemodel.PodKey("default", "pod1"),
		Resource: kubemodel.PodResource, PrevValue: annotated(1, "pigeon"), NewValue: annotated(1, "memif")}))
	a.Sync(t)
	assert.Equal(t, podiface.Memif, typeOfPod(t, a.Pods, podID(1)))
	ev := addPodEvent(e, 1, podiface.Default)
	require.NoError(t, a.AddPod(t, ev))
	assert.Equal(t, podiface.Memif, ev.Interfaces[0].Type)

	// Broken after the pod was attached: the pod stays as it is.
	require.NoError(t, a.Loop.PushEvent(&controller.KubeStateChange{Key: kubemodel.PodKey("default", "pod1"),
		Resource: kubemodel.PodResource, PrevValue: annotated(1, "memif"), NewValue: annotated(1, "carrier-pigeon")}))
	a.Sync(t)
	a.Resync(t, kube)
	_, ok = a.Pods.PodInterface(podID(1))
	assert.True(t, ok, "an attached pod is not disconnected by its annotation")
}

// TestSandboxReplaced: a pod's new sandbox (another container ID) replaces
// the old one's interface; a late DeletePod of the old sandbox changes
// nothing; a bad request fails the AddPod and IPAM takes the address back.
func TestSandboxReplaced(t *testing.T) {
	e := simEnv(t)
	a := rendertest.Start(t, rendertest.Options{Name: "node-1", DB: nodesynctest.NewMemDB(), NewAdapter: e.newAdapter})
	first := addPodEvent(e, 0, podiface.AfPacket)
	require.NoError(t, a.AddPod(t, first))
	old, _ := a.Pods.PodInterface(podID(0))
	second := controller.NewAddPodEvent(podID(0), "another-sandbox", e.netns(0))
	second.HostIfName, second.InterfaceType = e.hostIf(1), podiface.AfPacket
	require.NoError(t, a.AddPod(t, second))
	cur, _ := a.Pods.PodInterface(podID(0))
	require.NotEqual(t, old, cur)
	ip, ok := a.IPAM.PodAddr(podID(0))
	require.True(t, ok)
	// The old sandbox's DeletePod, late. (IPAM releases the pod's address
	// on any DeletePod of the pod; podconn keeps the new sandbox.)
	a.DeletePod(t, podID(0), first.ContainerID)
	a.WaitConfigured(t)
	tables := rendertest.Tables(t, e.newAdapter)
	assert.NotContains(t, tables, "interface "+old)
	assert.Contains(t, tables, "interface "+cur)
	assert.Equal(t, "via "+cur+" "+ip.String(), tables["route "+ip.String()+"/32"])

	bad := controller.NewAddPodEvent(podID(5), "c5", e.netns(5))
	bad.InterfaceType = podiface.AfPacket // no HostIfName
	require.ErrorIs(t, a.AddPod(t, bad), podconn.ErrBadRequest)
	_, ok = a.IPAM.PodAddr(podID(5))
	assert.False(t, ok)
	_, ok = a.Pods.PodInterface(podID(5))
	assert.False(t, ok)
}

// The handler is what the service processor asks for pod interfaces, and
// IPAM is what it takes addresses from.
var (
	_ svcprocessor.PodInterfaces = (*podconn.Handler)(nil)
	_ podconn.IPAM               = (*ipam.IPAM)(nil)
)

// TestStartWithoutAttachments: an agent that restarts while the pod
// server's records cannot be read does not remove the pods from VPP (the
// start-up resync is aborted, nothing is committed); once they can be
// read, a healing resync rebuilds the pods, finding VPP as it wants it.
func TestStartWithoutAttachments(t *testing.T) {
	e := simEnv(t)
	node := &rendertest.Node{}
	a := startAgent(t, e, node)
	for i := range 2 {
		require.NoError(t, a.AddPod(t, addPodEvent(e, i, podiface.AfPacket)))
	}
	a.WaitConfigured(t)
	before := rendertest.Tables(t, e.newAdapter)
	a.Stop()

	node.SetListError(errors.New("pod server store unavailable"))
	e.rec.Take()
	b := startAgent(t, e, node)
	b.Sync(t)
	assert.Equal(t, before, rendertest.Tables(t, e.newAdapter))
	assert.Empty(t, vppdrivertest.Writes(e.rec.Take()), "nothing removed")
	_, ok := b.Pods.PodInterface(podID(0))
	assert.False(t, ok)

	node.SetListError(nil)
	require.Eventually(t, func() bool { _, ok := b.Pods.PodInterface(podID(1)); return ok }, 10*time.Second, 10*time.Millisecond)
	b.Sync(t)
	b.WaitConfigured(t)
	assert.Equal(t, before, rendertest.Tables(t, e.newAdapter))
	assert.Empty(t, vppdrivertest.Writes(e.rec.Take()))
}

// TestPodWithoutAddressLeftOut: a recorded pod that IPAM has no address
// for at a resync (its allocation was lost) is left out and logged, as
// Resync's doc says; the other pods are rebuilt.
func TestPodWithoutAddressLeftOut(t *testing.T) {
	e := simEnv(t)
	node := &rendertest.Node{}
	a := startAgent(t, e, node)
	for i := range 2 {
		require.NoError(t, a.AddPod(t, addPodEvent(e, i, podiface.AfPacket)))
	}
	a.Stop()
	require.NoError(t, node.Store.DeleteAllocation(context.Background(), podID(0)))

	logs := &rendertest.LogBuffer{}
	b := rendertest.Start(t, rendertest.Options{Name: "node-1", DB: e.db, NewAdapter: e.newAdapter, Node: node,
		PodConn: podconn.Config{MemifSocketDir: e.memifDir, Logger: logs.Logger()}})
	_, ok := b.Pods.PodInterface(podID(0))
	assert.False(t, ok, "left out")
	_, ok = b.Pods.PodInterface(podID(1))
	assert.True(t, ok)
	assert.Contains(t, logs.String(), "level=WARN msg=\"pod left out\" component=podconn pod=default/pod0")
	assert.Contains(t, logs.String(), podconn.ErrNoPodIP.Error())
}

// TestDualStackPod: with the second family's IPAM a pod has an address
// of each family on its interface, each with a host route and a
// neighbor; the gateway loopback holds both gateways; the results carry
// both addresses and a default route per family; a resync (an agent
// restart) builds the same.
func TestDualStackPod(t *testing.T) {
	e := simEnv(t)
	v6 := ipam.Config{PodSubnetCIDR: netip.MustParsePrefix("fd00:1::/48"), PodSubnetOneNodePrefixLen: 64,
		VPPHostSubnetCIDR: netip.MustParsePrefix("fd00:30::/112"), NodeInterconnectCIDR: netip.MustParsePrefix("fd00:16::/64"),
		VXLANCIDR: netip.MustParsePrefix("fd00:31::/64"), ServiceCIDR: netip.MustParsePrefix("fd00:96::/108")}
	node := &rendertest.Node{}
	o := rendertest.Options{Name: "node-1", DB: e.db, NewAdapter: e.newAdapter, Node: node, DualStack: &v6}
	a := rendertest.Start(t, o)
	ev := addPodEvent(e, 0, podiface.AfPacket)
	require.NoError(t, a.AddPod(t, ev))
	require.Len(t, ev.Interfaces, 1)
	assert.Equal(t, []string{"10.1.1.2/32", "fd00:1:0:1::2/128"}, ev.Interfaces[0].IPAddresses)
	assert.Equal(t, []podiface.Route{{Network: "0.0.0.0/0", Gateway: "10.1.1.1"}, {Network: "::/0", Gateway: "fd00:1:0:1::1"}}, ev.Routes)
	a.WaitConfigured(t)
	tables := rendertest.Tables(t, e.newAdapter)
	assert.Contains(t, tables["interface pod-gw"], "addrs=[10.1.1.1/32 fd00:1:0:1::1/128]")
	name := "pod-" + strings.TrimPrefix(strings.SplitN(tables["route 10.1.1.2/32"], " ", 3)[1], "pod-")
	assert.Equal(t, "via "+name+" 10.1.1.2", tables["route 10.1.1.2/32"])
	assert.Equal(t, "via "+name+" fd00:1:0:1::2", tables["route fd00:1:0:1::2/128"])
	assert.Contains(t, tables, "neighbor "+name+" 10.1.1.2")
	assert.Contains(t, tables, "neighbor "+name+" fd00:1:0:1::2")

	a.Stop()
	writes := e.rec.WriteCount()
	b := rendertest.Start(t, o)
	b.WaitConfigured(t)
	assert.Equal(t, writes, e.rec.WriteCount(), "an agent restart writes nothing: %v", e.rec.Counts())
	assert.Equal(t, tables, rendertest.Tables(t, e.newAdapter))
}
