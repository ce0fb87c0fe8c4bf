package boltstore_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/ipam"
	"github.com/vswitchkit/vswitchkit/ipam/boltstore"
	"github.com/vswitchkit/vswitchkit/ipam/ipamtest"
)

// IPAM of node 5 persisting its allocations in a local bbolt file; after
// a restart the allocations are recovered from the file.
func Example() {
	dir, _ := os.MkdirTemp("", "boltstore-example")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "ipam.db") // e.g. /var/lib/vswitchkit/ipam.db

	start := func() (*ipam.IPAM, *boltstore.Store) {
		store, err := boltstore.Open(path, boltstore.Config{})
		if err != nil {
			panic(err)
		}
		i, err := ipam.New(ipamtest.NewNodeID(5), ipam.Config{Store: store})
		if err != nil {
			panic(err)
		}
		if err := i.Resync(controller.NewDBResync(), controller.NewKubeStateData(), 1, nil); err != nil {
			panic(err)
		}
		return i, store
	}
	i, store := start()
	for _, name := range []string{"web-0", "web-1"} {
		ip, err := i.AllocatePodIP(kubemodel.PodID{Namespace: "default", Name: name}, "", "")
		if err != nil {
			panic(err)
		}
		fmt.Println(name, ip)
	}
	store.Close() // the agent stops (or crashes)

	i, store = start()
	defer store.Close()
	ip, _ := i.AllocatePodIP(kubemodel.PodID{Namespace: "default", Name: "web-2"}, "", "")
	fmt.Println("after the restart: web-0", i.GetPodIP(kubemodel.PodID{Namespace: "default", Name: "web-0"}), "web-2", ip)
	// Output:
	// web-0 10.1.5.2
	// web-1 10.1.5.3
	// after the restart: web-0 10.1.5.2/24 web-2 10.1.5.4
}
