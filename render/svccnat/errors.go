package svccnat

import (
	"cmp"
	"fmt"
	"strings"

	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
)

// Reason is why a part of a service or of a pod's hostPorts is not
// rendered as asked.
type Reason int

// Reasons of a [Problem].
const (
	// UnknownLB: the service's [LBAnnotation] is neither [LBECMP] nor
	// [LBMaglev]; the service is rendered with ecmp. Detail: the value.
	UnknownLB Reason = iota + 1
	// UnsupportedProtocol: a service port or hostPort of a protocol cnat
	// does not translate here (SCTP); it is not rendered (nothing is
	// turned into TCP or UDP). Detail: protocol/port.
	UnsupportedProtocol
	// NoNodeAddress: the service's node ports (or the pod's hostPorts) of
	// an IP family are not exposed: this node has no address of that
	// family. Detail: "IPv4" or "IPv6".
	NoNodeAddress
	// FrontendTaken: another service or pod has the frontend (protocol,
	// address, port); services come before pods, each by namespace/name.
	// The frontend is rendered for this one when the other lets it go.
	// Detail: the frontend and its owner.
	FrontendTaken
	// HostIPNotLocal: a hostPort's hostIP is not an address of this node;
	// that hostPort is not exposed. Detail: the hostIP.
	HostIPNotLocal
)

func (r Reason) String() string {
	switch r {
	case UnknownLB:
		return "UnknownLB"
	case UnsupportedProtocol:
		return "UnsupportedProtocol"
	case NoNodeAddress:
		return "NoNodeAddress"
	case FrontendTaken:
		return "FrontendTaken"
	case HostIPNotLocal:
		return "HostIPNotLocal"
	}
	return fmt.Sprintf("Reason(%d)", int(r))
}

// Problem describes one part of a service or of a pod's hostPorts that
// the renderer does not render as the Kubernetes object asks: the rest of
// the service (pod) and every other one are rendered. The renderer logs a
// problem at Warn once, when it appears, and lists the current ones in
// [Renderer.Problems] until the object is fixed, deleted or the cause
// goes. It is a comparable value.
type Problem struct {
	// Service is the service the problem is about (zero for a pod's).
	Service kubemodel.ServiceID
	// Pod is the pod whose hostPort the problem is about (zero for a
	// service's).
	Pod kubemodel.PodID
	// Reason is what is wrong.
	Reason Reason
	// Detail names the part (see the reasons).
	Detail string
}

func (p *Problem) Error() string {
	var who string
	if p.Pod != (kubemodel.PodID{}) {
		who = "pod " + p.Pod.String()
	} else {
		who = "service " + p.Service.String()
	}
	var what string
	switch p.Reason {
	case UnknownLB:
		what = fmt.Sprintf("annotation %s %q is neither %q nor %q: rendered with %s", LBAnnotation, p.Detail, LBECMP, LBMaglev, LBECMP)
	case UnsupportedProtocol:
		what = fmt.Sprintf("port %s is not rendered: cnat translates TCP and UDP only", p.Detail)
	case NoNodeAddress:
		what = fmt.Sprintf("%s node ports and hostPorts are not exposed: this node has no %s address", p.Detail, p.Detail)
	case FrontendTaken:
		what = fmt.Sprintf("frontend %s is not rendered for it", p.Detail)
	case HostIPNotLocal:
		what = fmt.Sprintf("hostIP %s is not an address of this node: that hostPort is not exposed", p.Detail)
	default:
		what = p.Detail
	}
	return "svccnat: " + who + ": " + what
}

func compareProblems(a, b Problem) int {
	return cmp.Or(a.Service.Compare(b.Service), a.Pod.Compare(b.Pod), cmp.Compare(a.Reason, b.Reason), strings.Compare(a.Detail, b.Detail))
}
