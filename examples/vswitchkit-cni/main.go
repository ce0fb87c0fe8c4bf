// Command vswitchkit-cni is the CNI plugin of a vswitchkit agent: install
// it in the runtime's CNI binary directory (/opt/cni/bin) and name it as
// the "type" of the network configuration. It forwards every request to
// the agent's CNI server over a unix socket; see README.md.
package main

import "github.com/vswitchkit/vswitchkit/cniserver/cniplugin"

func main() {
	cniplugin.Main("vswitchkit-cni: CNI plugin of a vswitchkit agent (forwards to the agent's cniserver)")
}
