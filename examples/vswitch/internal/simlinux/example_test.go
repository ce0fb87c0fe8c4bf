package simlinux_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/vswitchkit/vswitchkit/cniserver"
	"github.com/vswitchkit/vswitchkit/examples/vswitch/internal/simlinux"
)

// A pod's namespace is a file: while it exists, the pod's veth pair can be
// made; its host end is what VPP's af_packet attaches to.
func ExampleLinux() {
	dir, _ := os.MkdirTemp("", "simlinux")
	defer os.RemoveAll(dir)
	ns := filepath.Join(dir, "pod")
	l := simlinux.New()
	v := cniserver.Veth{HostName: "vskpod", PeerName: "vskpodp", Netns: ns, IfName: "eth0"}

	_, err := l.EnsureVeth(context.Background(), v)
	fmt.Println("no namespace yet:", err != nil)
	_ = os.WriteFile(ns, nil, 0o600)
	_, err = l.EnsureVeth(context.Background(), v)
	fmt.Println("veth made:", err == nil, l.HostInterfaceExists("vskpod"))
	_ = os.Remove(ns)
	fmt.Println("after the namespace is gone:", l.HostInterfaceExists("vskpod"))
	// Output:
	// no namespace yet: true
	// veth made: true true
	// after the namespace is gone: false
}
