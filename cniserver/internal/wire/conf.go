package wire

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/utils"
	"github.com/containernetworking/cni/pkg/version"
)

// DefaultSocketPath is the agent's socket when the network configuration
// sets no agentSocket.
const DefaultSocketPath = "/run/vswitchkit/cni.sock"

// supportedVersions are the CNI specification versions the plugin and the
// server speak; results are produced in version 1.1.0 and converted to the
// configuration's cniVersion.
var supportedVersions = []string{"0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"}

// SupportedVersions returns the CNI specification versions that the plugin
// and the server support.
func SupportedVersions() []string { return slices.Clone(supportedVersions) }

// NetConf is the network configuration of the vswitchkit plugin: the
// common fields of the specification and the plugin's own.
type NetConf struct {
	types.PluginConf
	// AgentSocket is the server's unix socket. Default DefaultSocketPath.
	AgentSocket string `json:"agentSocket,omitempty"`
	// AgentTimeout bounds the plugin's wait for the agent, as a Go
	// duration ("90s"). Default "60s".
	AgentTimeout string `json:"agentTimeout,omitempty"`
}

// DefaultAgentTimeout is the plugin's wait for the agent when the network
// configuration does not set agentTimeout.
const DefaultAgentTimeout = 60 * time.Second

// ParseNetConf decodes and validates a network configuration as the plugin
// received it on stdin. Errors are CNI errors: 6 for undecodable JSON,
// 1 for an unsupported cniVersion, 7 for a bad field.
func ParseNetConf(data []byte) (*NetConf, time.Duration, *types.Error) {
	var c NetConf
	if err := json.Unmarshal(data, &c); err != nil {
		var syn *json.SyntaxError
		if errors.As(err, &syn) || len(data) == 0 {
			return nil, 0, types.NewError(types.ErrDecodingFailure, "cannot decode the network configuration", err.Error())
		}
		return nil, 0, types.NewError(types.ErrInvalidNetworkConfig, "invalid network configuration", err.Error())
	}
	if c.Name == "" {
		return nil, 0, types.NewError(types.ErrInvalidNetworkConfig, "invalid network configuration", "missing network name")
	}
	if err := utils.ValidateNetworkName(c.Name); err != nil {
		return nil, 0, err
	}
	if c.CNIVersion == "" {
		c.CNIVersion = "0.1.0"
	}
	if !slices.Contains(supportedVersions, c.CNIVersion) {
		return nil, 0, types.NewError(types.ErrIncompatibleCNIVersion, "incompatible CNI version",
			fmt.Sprintf("cniVersion %q; the vswitchkit plugin supports %s", c.CNIVersion, strings.Join(supportedVersions, ", ")))
	}
	if c.AgentSocket != "" && !filepath.IsAbs(c.AgentSocket) {
		return nil, 0, types.NewError(types.ErrInvalidNetworkConfig, "invalid network configuration",
			fmt.Sprintf("agentSocket %q is not an absolute path", c.AgentSocket))
	}
	timeout := DefaultAgentTimeout
	if c.AgentTimeout != "" {
		d, err := time.ParseDuration(c.AgentTimeout)
		if err != nil || d <= 0 {
			return nil, 0, types.NewError(types.ErrInvalidNetworkConfig, "invalid network configuration",
				fmt.Sprintf("agentTimeout %q is not a positive duration like \"60s\"", c.AgentTimeout))
		}
		timeout = d
	}
	if c.RawPrevResult != nil {
		if err := version.ParsePrevResult(&c.PluginConf); err != nil {
			return nil, 0, types.NewError(types.ErrInvalidNetworkConfig, "invalid prevResult in the network configuration", err.Error())
		}
	}
	return &c, timeout, nil
}
