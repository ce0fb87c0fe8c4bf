package cniserver_test

import (
	"crypto/sha512"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vswitchkit/vswitchkit/cniserver"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppsim"
)

// TestCnitool runs the commands of examples/vswitchkit-cni/README.md with
// cnitool (github.com/containernetworking/cni/cnitool at the version
// go.mod pins), with the README's network configuration, against a test
// agent. Run it with -v to see what cnitool prints.
func TestCnitool(t *testing.T) {
	nd := newNode(t, 0)
	netnsName := "vskit-" + nd.runID + "-demo"
	netns := "/run/netns/" + netnsName
	// cnitool names the container after its namespace path.
	sum := sha512.Sum512([]byte(netns))
	p := &pod{name: "demo", container: fmt.Sprintf("cnitool-%x", sum[:10]), netnsName: netnsName, netns: netns}
	p.hostIf = cniserver.HostIfName(p.container, "eth0")
	nd.pods = append(nd.pods, p)
	nd.vpp = vppsim.New(vppsim.Config{HostInterfaces: []string{p.hostIf}})
	nd.createNetns(p)
	t.Cleanup(func() { _ = os.Remove("/var/lib/cni/results/vswitchkit-" + p.container + "-eth0") })
	a := nd.startAgent(cniserver.Config{})

	// The README's configuration, with the test agent's socket.
	conf, err := os.ReadFile("../examples/vswitchkit-cni/10-vswitchkit.conflist")
	require.NoError(t, err)
	netDir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(netDir, "10-vswitchkit.conflist"),
		[]byte(strings.Replace(string(conf), "/run/vswitchkit/cni.sock", nd.socket, 1)), 0o600))

	cnitool := func(cmd string) (string, error) {
		c := exec.Command(filepath.Join(pluginDir, "cnitool"), cmd, "vswitchkit", netns)
		c.Env = append(os.Environ(), "CNI_PATH="+pluginDir, "NETCONFPATH="+netDir,
			"CNI_ARGS=K8S_POD_NAMESPACE=default;K8S_POD_NAME=demo")
		out, err := c.CombinedOutput()
		t.Logf("$ cnitool %s vswitchkit %s\n%s(exit: %v)", cmd, netns, out, err)
		return string(out), err
	}

	_, err = cnitool("status")
	require.NoError(t, err)
	out, err := cnitool("add")
	require.NoError(t, err)
	assert.Contains(t, out, `"address": "10.1.5.2/24"`)
	assert.Contains(t, out, `"gateway": "10.1.5.1"`)
	assert.Contains(t, out, `"nameservers": [`)
	v := viewNetns(t, netnsName)
	assert.Equal(t, []string{"10.1.5.2/24"}, v.addrs)
	assert.Equal(t, []string{"default via 10.1.5.1"}, v.routes)
	ipOut, _ := exec.Command("ip", "-n", netnsName, "-br", "addr").CombinedOutput()
	t.Logf("$ ip -n %s -br addr\n%s", netnsName, ipOut)
	ipOut, _ = exec.Command("ip", "-n", netnsName, "neigh").CombinedOutput()
	t.Logf("$ ip -n %s neigh\n%s", netnsName, ipOut)

	_, err = cnitool("check")
	require.NoError(t, err)
	_, err = cnitool("del")
	require.NoError(t, err)
	requireGone(t, nd, a, p)

	// gc without a list of valid attachments removes every attachment of
	// the network.
	_, err = cnitool("add")
	require.NoError(t, err)
	_, err = cnitool("gc")
	require.NoError(t, err)
	requireGone(t, nd, a, p)
}
