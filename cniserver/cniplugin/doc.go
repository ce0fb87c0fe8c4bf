// Package cniplugin is the plugin side of the vswitchkit CNI integration:
// the logic of the small binary a container runtime executes (CNI
// specification 1.1). [Main] is all a plugin binary's main needs (see
// examples/vswitchkit-cni); [Call] sends one request from Go.
//
// The plugin keeps no state. For ADD, DEL, CHECK, GC and STATUS it sends
// the CNI parameters and the network configuration to the agent's
// cniserver.Server over the agent's unix socket (HTTP with JSON), waits
// for the answer at most agentTimeout, and prints the result or the error
// in the specification's format; VERSION it answers itself (0.3.0 to
// 1.1.0). When the configuration has an "ipam" section the plugin runs that
// IPAM plugin itself (it is found through CNI_PATH, as the specification
// requires) and passes its result to the agent, which hands it to its IPAM
// handler as AddPod.IPAMType/IPAMData; DEL, CHECK, GC and STATUS are
// delegated to it too.
//
// # Network configuration
//
//	{
//	  "cniVersion": "1.1.0",
//	  "name": "vswitchkit",
//	  "type": "vswitchkit-cni",
//	  "agentSocket": "/run/vswitchkit/cni.sock",
//	  "agentTimeout": "60s",
//	  "dns": {"nameservers": ["10.96.0.10"]}
//	}
//
// agentSocket defaults to /run/vswitchkit/cni.sock, agentTimeout to 60s.
//
// # Errors
//
// Errors of the plugin itself: 11 (try again later) when the agent is
// unreachable, stops answering or does not answer within agentTimeout (50
// for STATUS: the plugin cannot serve ADD); 7 for a bad agentSocket or
// agentTimeout; 4 and 6 from skel for missing parameters and undecodable
// configuration. The agent's errors are passed through; package cniserver
// lists them.
//
// # Concurrency
//
// Call is safe for concurrent use; Main runs once per process.
package cniplugin
