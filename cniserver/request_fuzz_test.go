package cniserver

import (
	"slices"
	"testing"

	"github.com/vswitchkit/vswitchkit/cniserver/internal/wire"
)

// FuzzParseRequest: whatever the plugin forwards, parsing does not panic,
// fails with one of the specification's codes for bad input, and a
// request it accepts is usable.
func FuzzParseRequest(f *testing.F) {
	f.Add("ADD", "c1", "/run/netns/p", "eth0", "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web",
		[]byte(`{"cniVersion":"1.1.0","name":"net","type":"vswitchkit-cni","dns":{"nameservers":["10.96.0.10"]}}`))
	f.Add("CHECK", "c1", "/run/netns/p", "eth0", "K8S_POD_NAMESPACE=a;K8S_POD_NAME=b",
		[]byte(`{"cniVersion":"1.0.0","name":"net","prevResult":{"cniVersion":"1.0.0","ips":[{"address":"10.1.1.2/24"}]}}`))
	f.Add("GC", "", "", "", "", []byte(`{"cniVersion":"1.1.0","name":"net","cni.dev/valid-attachments":[{"containerID":"c","ifname":"eth0"}]}`))
	f.Add("DEL", "c1", "", "eth0", "", []byte(`{"cniVersion":"0.3.1","name":"net","agentTimeout":"5s","agentSocket":"/x.sock"}`))
	f.Add("ADD", "c1", "rel", "eth0/x", "FOO", []byte(`{"cniVersion":"9","name":"a b"}`))
	f.Fuzz(func(t *testing.T, cmd, container, netns, ifName, args string, config []byte) {
		wr := &wire.Request{Command: cmd, ContainerID: container, Netns: netns, IfName: ifName, Args: args, Config: config}
		r, cerr := parseRequest(wr)
		if cerr != nil {
			if !slices.Contains([]uint{1, 3, 4, 6, 7}, cerr.Code) {
				t.Fatalf("code %d for bad input: %v", cerr.Code, cerr)
			}
			return
		}
		if r.conf == nil || r.conf.Name == "" || !slices.Contains(wire.SupportedVersions(), r.conf.CNIVersion) {
			t.Fatalf("accepted an unusable configuration: %+v", r.conf)
		}
		if cmd == cmdAdd && (r.pod.Name == "" || r.pod.Namespace == "" || netns == "") {
			t.Fatalf("accepted an ADD without pod or namespace: %+v", r)
		}
	})
}
