package agent_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"go.fd.io/govpp/adapter"
	"google.golang.org/protobuf/proto"

	"github.com/vswitchkit/vswitchkit/agent"
	"github.com/vswitchkit/vswitchkit/cniserver/cniservertest"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/embedetcd"
	"github.com/vswitchkit/vswitchkit/svcprocessor"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppsim"
)

// The full agent with your own service renderer in place of the built-in
// NAT44-ED one: etcd in the process, VPP as the stand-in, pods simulated.
// A reflector would write the cluster's services into etcd; here one is
// written by hand.
func Example_ownRenderer() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	etcd, _ := embedetcd.Start(ctx, embedetcd.Config{UnsafeNoFsync: true}) // errors elided where only checked
	defer etcd.Close()
	cli, _ := etcd.Client()
	dir, _ := os.MkdirTemp("", "agent")
	defer os.RemoveAll(dir)
	vpp := vppsim.New(vppsim.Config{})

	a, err := agent.Open(agent.Config{NodeName: "node-1", StateDir: dir, Services: agent.ServicesNone,
		BGP: agent.BGPConfig{Disabled: true}},
		agent.Deps{Etcd: cli, VPP: func() adapter.VppAPI { return vpp.NewAdapter() }, Linux: cniservertest.NewFakeLinux()})
	if err != nil {
		log.Fatal(err)
	}
	rendered := make(chan string, 1)
	_ = a.AddServiceRenderer(svcprocessor.RendererFunc(func(ev svcprocessor.RenderEvent) error {
		switch ev.Kind { // a real renderer puts VPP keys into ev.Txn or ev.ResyncTxn
		case svcprocessor.Resync:
			for _, s := range ev.Snapshot.Services {
				rendered <- fmt.Sprint(s.ID, " ", s.ClusterIPs)
			}
		case svcprocessor.ServiceAdded:
			rendered <- fmt.Sprint(ev.NewService.ID, " ", ev.NewService.ClusterIPs)
		}
		return nil
	}))
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	if err := a.WaitReady(ctx); err != nil { // start-up resync processed, node ID, VPP connected
		log.Fatal(err)
	}

	svc, _ := proto.Marshal(&kubemodel.Service{Namespace: "default", Name: "web", ClusterIps: []string{"10.96.0.10"},
		Ports: []*kubemodel.ServicePort{{Port: 80, TargetPortNumber: 8080}}})
	_, _ = cli.Put(ctx, kubemodel.EtcdKey("", kubemodel.ServiceKey("default", "web")), string(svc))
	fmt.Println("rendered", <-rendered)
	cancel()
	fmt.Println(<-done, cli.Close())
	// Output:
	// rendered default/web [10.96.0.10]
	// context canceled <nil>
}
