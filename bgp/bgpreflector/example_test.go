package bgpreflector_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/vswitchkit/vswitchkit/bgp/bgpmodel"
	"github.com/vswitchkit/vswitchkit/bgp/bgpreflector"
	"github.com/vswitchkit/vswitchkit/embedetcd/etcdtest"
	"github.com/vswitchkit/vswitchkit/reflector"
)

// The BGP peering policies of the cluster, read with the dynamic client,
// are reflected next to the built-in resources (omitted here) as
// bgpmodel.PeeringPolicy values. client-go's fake dynamic client stands in
// for the API server; the etcd is a real one, in-process.
func Example() {
	dir, _ := os.MkdirTemp("", "bgpreflector-example")
	defer os.RemoveAll(dir)
	srv, err := etcdtest.Start(dir)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()
	etcd, _ := srv.Client()
	defer etcd.Close()

	policy := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "vswitchkit.io/v1",
		"kind":       "BGPPeeringPolicy",
		"metadata":   map[string]any{"name": "rack1"},
		"spec": map[string]any{
			"nodeSelector": map[string]any{"matchLabels": map[string]any{"rack": "1"}},
			"virtualRouters": []any{map[string]any{
				"localASN":  int64(64512),
				"neighbors": []any{map[string]any{"peerAddress": "192.168.0.254", "peerASN": int64(64500)}},
			}},
		},
	}}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{bgpreflector.GroupVersionResource(): bgpreflector.ListKind}, policy)

	r, err := reflector.New(etcd, []reflector.Resource{bgpreflector.Resource(dyn)}, reflector.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	for r.Stats().Resources[bgpmodel.PolicyResourceName].Objects < 1 {
		time.Sleep(10 * time.Millisecond)
	}

	key := reflector.DefaultPrefix + bgpmodel.PolicyKey("rack1")
	resp, _ := etcd.Get(ctx, key)
	var p bgpmodel.PeeringPolicy
	_ = proto.Unmarshal(resp.Kvs[0].Value, &p)
	vr := p.GetVirtualRouters()[0]
	fmt.Println(key)
	fmt.Println("nodes:", p.GetNodeSelector().GetMatchLabels(), "ASN:", vr.GetLocalAsn(), "peer:", vr.GetNeighbors()[0].GetPeerAddress(), vr.GetNeighbors()[0].GetPeerAsn())

	cancel()
	fmt.Println("Run:", <-done)
	// Output:
	// /vswitchkit/k8s/bgppeeringpolicy/rack1
	// nodes: map[rack:1] ASN: 64512 peer: 192.168.0.254 64500
	// Run: context canceled
}
