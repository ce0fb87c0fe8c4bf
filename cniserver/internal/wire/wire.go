// Package wire is the protocol between the CNI plugin binary and the
// agent's server: one HTTP POST of a JSON [Request] to [Path] over the
// agent's unix socket, answered with a JSON [Response] (status 200 also
// for CNI errors; other statuses mean the request did not reach the
// server's CNI handling).
package wire

import (
	"encoding/json"

	"github.com/containernetworking/cni/pkg/types"
)

// Path is the URL path of the CNI endpoint.
const Path = "/v1/cni"

// MaxRequestBytes bounds the size of a request body.
const MaxRequestBytes = 1 << 20

// Request is one CNI invocation as the plugin received it.
type Request struct {
	// Command is CNI_COMMAND: ADD, DEL, CHECK, GC or STATUS (VERSION is
	// answered by the plugin itself).
	Command     string `json:"command"`
	ContainerID string `json:"containerID,omitempty"`
	Netns       string `json:"netns,omitempty"`
	IfName      string `json:"ifName,omitempty"`
	Args        string `json:"args,omitempty"`
	Path        string `json:"path,omitempty"`
	// Config is the network configuration from the plugin's stdin.
	Config json.RawMessage `json:"config"`
	// IPAMResult is, for ADD with a delegated IPAM plugin ("ipam" in the
	// configuration), that plugin's result as it printed it.
	IPAMResult json.RawMessage `json:"ipamResult,omitempty"`
}

// Response is the answer to a Request: on success Result is what the
// plugin prints (ADD only); on failure Error is the CNI error to print.
type Response struct {
	Result json.RawMessage `json:"result,omitempty"`
	Error  *types.Error    `json:"error,omitempty"`
}
