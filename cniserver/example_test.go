package cniserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/containernetworking/cni/pkg/skel"

	"github.com/vswitchkit/vswitchkit/cniserver"
	"github.com/vswitchkit/vswitchkit/cniserver/cniplugin"
	"github.com/vswitchkit/vswitchkit/cniserver/cniservertest"
	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/podiface"
)

// Example runs a server on the in-memory Linux of cniservertest with an
// event loop whose pod handler connects every pod with af_packet, then
// adds and deletes a pod the way the plugin binary does.
func Example() {
	// The pod handler: in an agent, IPAM and the VPP pod handler.
	pods := &controller.HandlerFuncs{
		Name:    "pods",
		Handles: func(ev controller.Event) bool { _, ok := ev.(*controller.AddPod); return ok },
		UpdateFunc: func(ev controller.Event, _ controller.UpdateOperations) (string, error) {
			add := ev.(*controller.AddPod)
			add.Interfaces = []podiface.Interface{{
				HostName: add.IfName, Type: podiface.AfPacket,
				IPAddresses: []string{"10.1.5.2/24"}, GatewayMAC: "02:fe:00:00:00:01",
			}}
			add.Routes = []podiface.Route{{Network: "0.0.0.0/0", Gateway: "10.1.5.1"}}
			return "", nil
		},
	}
	loop, err := controller.New([]controller.EventHandler{pods}, controller.SouthboundFunc(
		func(context.Context, *controller.Commit) (uint64, error) { return 0, nil }), controller.Config{})
	if err != nil {
		panic(err)
	}
	linux := cniservertest.NewFakeLinux()
	if err := linux.AddNetns("/run/netns/web"); err != nil {
		panic(err)
	}
	dir, err := os.MkdirTemp("", "cniexample")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	socket := filepath.Join(dir, "cni.sock")
	srv, err := cniserver.New(loop, linux, cniservertest.NewMemStore(), cniserver.Config{
		SocketPath: socket, InterfaceType: podiface.AfPacket,
	})
	if err != nil {
		panic(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	loopDone, srvDone := make(chan error), make(chan error)
	go func() { loopDone <- loop.Run(ctx) }()
	go func() { srvDone <- srv.Run(ctx) }()
	if err := loop.PushEvent(controller.NewDBResync()); err != nil {
		panic(err)
	}

	args := &skel.CmdArgs{
		ContainerID: "0123abcd", Netns: "/run/netns/web", IfName: "eth0",
		Args:      "K8S_POD_NAMESPACE=default;K8S_POD_NAME=web",
		StdinData: []byte(`{"cniVersion":"1.1.0","name":"vswitchkit","type":"vswitchkit-cni"}`),
	}
	var out []byte
	for range 5000 { // the socket appears once Run listens
		if out, err = cniplugin.Call(ctx, socket, "ADD", args); err == nil {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if err != nil {
		panic(err)
	}
	var res struct {
		IPs []struct{ Address, Gateway string }
	}
	if err := json.Unmarshal(out, &res); err != nil {
		panic(err)
	}
	fmt.Println("ADD:", res.IPs[0].Address, "via", res.IPs[0].Gateway)
	for _, l := range linux.Links("/run/netns/web") {
		fmt.Println("pod:", l.Name, l.Addresses, l.Routes, l.Neighbors)
	}
	fmt.Println("host:", linux.Links("")[0].Name == cniserver.HostIfName("0123abcd", "eth0"))

	if _, err := cniplugin.Call(ctx, socket, "DEL", args); err != nil {
		panic(err)
	}
	fmt.Println("after DEL:", len(linux.Links("/run/netns/web")), "pod links,", len(linux.Links("")), "host links")
	cancel()
	fmt.Println("server:", <-srvDone, "loop:", <-loopDone)
	// Output:
	// ADD: 10.1.5.2/24 via 10.1.5.1
	// pod: eth0 [10.1.5.2/24] [0.0.0.0/0 via 10.1.5.1] [10.1.5.1 lladdr 02:fe:00:00:00:01]
	// host: true
	// after DEL: 0 pod links, 0 host links
	// server: context canceled loop: context canceled
}
