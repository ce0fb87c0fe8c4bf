package config_test

import (
	"fmt"

	"github.com/vswitchkit/vswitchkit/examples/vswitch/internal/config"
)

func ExampleDecode() {
	var cfg config.Config
	err := config.Decode([]byte(`
nodeName: node-1
etcd:
  endpoints: [127.0.0.1:2379]
  dialTimeout: 5
ipam:
  podSubnetCIDRs: 10.1.0.0/16
`), &cfg)
	fmt.Println(cfg.NodeName)
	fmt.Println(err)
	// Output:
	// node-1
	// etcd.dialTimeout: want a duration such as "5s" or "1m30s"
	// ipam.podSubnetCIDRs: unknown field
}
