package podconn

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/vswitchkit/vswitchkit/controller/podiface"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppmodel"
)

// Defaults of [Config].
const (
	DefaultInterfaceType  = podiface.AfPacket
	DefaultGatewayName    = "pod-gw"
	DefaultMemifSocketDir = "/run/vpp"
)

// Config configures a [Handler]. The zero value is valid. It is a plain
// value, copied by [New].
type Config struct {
	// InterfaceType is the type of a pod's interface when neither the
	// AddPod event nor the pod's annotation
	// (podiface.TypeAnnotation) chooses one. Default:
	// af_packet, which works on every host (tap needs /dev/vhost-net).
	InterfaceType podiface.Type

	// GatewayName is the logical name of the loopback that holds the pod
	// gateway address (IPAM's PodGatewayAddr); pod interfaces borrow it
	// (unnumbered). Default: DefaultGatewayName.
	GatewayName string

	// MemifSocketDir is the directory of the memif control sockets, one
	// per pod interface (VPP is the master; the pod's application
	// connects as slave). Default: DefaultMemifSocketDir.
	MemifSocketDir string

	// Attachments lists the pods attached to this node, from a durable
	// record (the pod server keeps one): every resync rebuilds the pods
	// from it, so a restarted agent configures exactly the pods that are
	// there. Default: nil, the pods added since the handler was created
	// (an agent restart then removes the pods added by the previous
	// process from VPP until they are added again).
	Attachments Attachments

	// DualStack is the IPAM of the second IP family in a dual-stack
	// cluster: every pod gets its address of that family too (on the same
	// interface, with a host route and a neighbor entry), the gateway
	// loopback holds that family's pod gateway, and the pod's results
	// carry both addresses and a default route of each family. Default
	// nil: one family, the IPAM's.
	DualStack IPAM

	// Logger receives debug logs, and a Warn for a pod whose interface
	// type annotation names no type (once per pod and value). Default:
	// discard.
	Logger *slog.Logger
}

func (c Config) withDefaults() (Config, error) {
	var errs []error
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.InterfaceType == podiface.Default {
		c.InterfaceType = DefaultInterfaceType
	}
	if _, err := podiface.ParseType(string(c.InterfaceType)); err != nil {
		errs = append(errs, fmt.Errorf("InterfaceType: %w", err))
	}
	if c.GatewayName == "" {
		c.GatewayName = DefaultGatewayName
	}
	if err := vppmodel.Validate(&vppmodel.Interface{Name: c.GatewayName, Type: vppmodel.Interface_LOOPBACK}); err != nil {
		errs = append(errs, fmt.Errorf("GatewayName: %w", err))
	}
	if c.MemifSocketDir == "" {
		c.MemifSocketDir = DefaultMemifSocketDir
	}
	if !filepath.IsAbs(c.MemifSocketDir) || len(c.MemifSocketDir) > 80 {
		errs = append(errs, fmt.Errorf("MemifSocketDir %q must be an absolute path of at most 80 bytes (socket paths are limited to 107)", c.MemifSocketDir))
	}
	if err := errors.Join(errs...); err != nil {
		return c, fmt.Errorf("podconn: invalid config: %w", err)
	}
	return c, nil
}
