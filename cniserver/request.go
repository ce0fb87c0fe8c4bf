package cniserver

import (
	"fmt"
	"path/filepath"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/utils"

	"github.com/vswitchkit/vswitchkit/cniserver/internal/wire"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
)

// CNI commands served by the server (VERSION is answered by the plugin).
const (
	cmdAdd    = "ADD"
	cmdDel    = "DEL"
	cmdCheck  = "CHECK"
	cmdGC     = "GC"
	cmdStatus = "STATUS"
)

// k8sArgs are the CNI_ARGS kubelet passes.
type k8sArgs struct {
	types.CommonArgs
	K8S_POD_NAMESPACE          types.UnmarshallableString
	K8S_POD_NAME               types.UnmarshallableString
	K8S_POD_INFRA_CONTAINER_ID types.UnmarshallableString
	K8S_POD_UID                types.UnmarshallableString
}

// request is a parsed and validated wire.Request.
type request struct {
	cmd        string
	id         AttachmentID
	netns      string
	conf       *wire.NetConf
	pod        kubemodel.PodID
	ipamResult []byte
}

// parseRequest validates what the plugin forwarded. Errors carry the CNI
// code: 4 for a bad or missing parameter, 6/7/1 for the configuration.
func parseRequest(wr *wire.Request) (*request, *types.Error) {
	r := &request{cmd: wr.Command, id: AttachmentID{ContainerID: wr.ContainerID, IfName: wr.IfName}, netns: wr.Netns}
	envErr := func(format string, args ...any) *types.Error {
		return types.NewError(types.ErrInvalidEnvironmentVariables, "invalid CNI parameters", fmt.Sprintf(format, args...))
	}
	switch r.cmd {
	case cmdAdd, cmdDel, cmdCheck, cmdGC, cmdStatus:
	default:
		return nil, envErr("unknown CNI_COMMAND %q", r.cmd)
	}
	conf, _, cerr := wire.ParseNetConf(wr.Config)
	if cerr != nil {
		return nil, cerr
	}
	r.conf = conf
	if r.cmd == cmdGC || r.cmd == cmdStatus {
		return r, nil
	}
	if err := utils.ValidateContainerID(r.id.ContainerID); err != nil {
		return nil, err
	}
	if err := utils.ValidateInterfaceName(r.id.IfName); err != nil {
		return nil, err
	}
	if r.netns == "" && r.cmd != cmdDel {
		return nil, envErr("CNI_NETNS is required for %s", r.cmd)
	}
	if r.netns != "" && !filepath.IsAbs(r.netns) {
		return nil, envErr("CNI_NETNS %q is not an absolute path", r.netns)
	}
	var args k8sArgs
	if err := types.LoadArgs(wr.Args, &args); err != nil {
		return nil, envErr("CNI_ARGS %q: %v", wr.Args, err)
	}
	r.pod = kubemodel.PodID{Namespace: string(args.K8S_POD_NAMESPACE), Name: string(args.K8S_POD_NAME)}
	if r.cmd == cmdAdd {
		if r.pod.Name == "" || r.pod.Namespace == "" {
			return nil, envErr("CNI_ARGS must name the pod with K8S_POD_NAMESPACE and K8S_POD_NAME (kubelet passes them; with cnitool set CNI_ARGS)")
		}
		if conf.IPAM.Type != "" && len(wr.IPAMResult) == 0 {
			return nil, types.NewError(types.ErrInvalidNetworkConfig, "invalid network configuration",
				fmt.Sprintf("ipam type %q is configured but the plugin sent no IPAM result", conf.IPAM.Type))
		}
		r.ipamResult = wr.IPAMResult
	}
	return r, nil
}
