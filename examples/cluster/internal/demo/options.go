package demo

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/vswitchkit/vswitchkit/agent"
)

// Defaults of [Options].
const (
	DefaultNodes       = 3
	DefaultPodsPerNode = 4
	DefaultServices    = 5
	DefaultTimeout     = 2 * time.Minute
)

// Limits of [Options]: the node addresses are 127.0.0.11 and up, and the
// node IDs of IPAM's default layout (a /24 of pods per node in
// 10.1.0.0/16) end at 255.
const (
	MaxNodes       = 240
	MaxPodsPerNode = 200
	MaxServices    = 200
)

// Options configure a [Run]. The zero value is valid: the defaults below.
// Options is a plain value, copied by Run.
type Options struct {
	// Nodes is the number of simulated nodes, 1..MaxNodes. Default 3.
	// The scripted change lets the last node leave when there are at
	// least two.
	Nodes int
	// PodsPerNode is the number of pods created on every node,
	// 1..MaxPodsPerNode. Default 4.
	PodsPerNode int
	// Services is the number of services, 1..MaxServices, of the kinds
	// ClusterIP, NodePort, LoadBalancer, ClusterIP with an external IP and
	// LoadBalancer with externalTrafficPolicy Local, in turn. Pods back
	// them round-robin. Default 5 (one of each kind).
	Services int
	// Etcd lists the client URLs of an external etcd to use instead of the
	// embedded one. The keys under /vswitchkit/ must be empty at the start
	// (Run refuses to mix with another cluster's state); Run deletes what
	// it wrote there when it ends. Default: an embedded etcd on loopback
	// with a temporary data directory.
	Etcd []string
	// RunFor keeps the cluster running this long after the scripted
	// change (for a look at etcd or the processes), then Run returns.
	// Default 0: return at once.
	RunFor time.Duration
	// JSON writes the result to out as one JSON document instead of text.
	JSON bool
	// Progress receives the progress reports. Default nil: none.
	Progress io.Writer
	// Live shows live progress bars on Progress (a terminal); otherwise
	// progress is plain lines.
	Live bool
	// Timeout bounds every wait for the cluster to converge; Run fails
	// with what is missing when it passes. Default 2m.
	Timeout time.Duration
	// RealKube runs a real Kubernetes control plane (kube-apiserver and
	// kube-controller-manager on loopback, internal/kubetest) instead of
	// client-go's fake clientsets: the objects go through its validation
	// and admission, its controller manager makes the EndpointSlices. The
	// first run builds the binaries (tools/kube/build: ~35 CPU-minutes,
	// ~4 GB of Go build cache); then the control plane adds ~10 s and
	// ~400 MB. Default false: the fake, fast, no build.
	RealKube bool
	// Logger receives the logs of every component (agents, reflector,
	// route reflector). Default: discard.
	Logger *slog.Logger
	// ServiceRenderer is the agents' service renderer: "nat44" (default;
	// render/svcnat onto NAT44-ED) or "cnat" (render/svccnat onto cnat).
	ServiceRenderer string
	// IPFamily is the cluster's IP family: "ipv4" (default) or "dual"
	// (dual-stack: pods and services of both families; needs
	// ServiceRenderer "cnat").
	IPFamily string
}

func (o Options) withDefaults() (Options, error) {
	var errs []error
	check := func(name string, v *int, def, maxV int) {
		switch {
		case *v == 0:
			*v = def
		case *v < 0 || *v > maxV:
			errs = append(errs, fmt.Errorf("%s: %d is not in 1..%d", name, *v, maxV))
		}
	}
	check("nodes", &o.Nodes, DefaultNodes, MaxNodes)
	check("pods per node", &o.PodsPerNode, DefaultPodsPerNode, MaxPodsPerNode)
	check("services", &o.Services, DefaultServices, MaxServices)
	if o.RunFor < 0 {
		errs = append(errs, fmt.Errorf("run-for: %v is negative", o.RunFor))
	}
	switch {
	case o.Timeout == 0:
		o.Timeout = DefaultTimeout
	case o.Timeout < 0:
		errs = append(errs, fmt.Errorf("timeout: %v is negative", o.Timeout))
	}
	switch o.ServiceRenderer {
	case "":
		o.ServiceRenderer = agent.ServicesNAT44
	case agent.ServicesNAT44, agent.ServicesCnat:
	default:
		errs = append(errs, fmt.Errorf("services: %q is neither %q nor %q", o.ServiceRenderer, agent.ServicesNAT44, agent.ServicesCnat))
	}
	switch o.IPFamily {
	case "":
		o.IPFamily = agent.IPv4
	case agent.IPv4:
	case agent.DualStack:
		if o.ServiceRenderer == agent.ServicesNAT44 {
			errs = append(errs, fmt.Errorf("ip-family %q needs services %q: NAT44 translates IPv4 only", agent.DualStack, agent.ServicesCnat))
		}
		if o.RealKube {
			errs = append(errs, fmt.Errorf("ip-family %q is not available with the real control plane: its API server has an IPv4 service range only", agent.DualStack))
		}
	default:
		errs = append(errs, fmt.Errorf("ip-family: %q is neither %q nor %q", o.IPFamily, agent.IPv4, agent.DualStack))
	}
	if o.Progress == nil {
		o.Progress = io.Discard
		o.Live = false
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o, errors.Join(errs...)
}
