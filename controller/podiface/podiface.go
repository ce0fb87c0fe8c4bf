package podiface

import (
	"fmt"

	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
)

// Type is the kind of a pod's interface: who creates it and how
// VPP reaches it. The zero value lets the pod handler choose.
type Type string

// Pod interface types.
const (
	// Default lets the pod handler choose: the pod's annotation
	// [TypeAnnotation] if set, else the handler's configured
	// default.
	Default Type = ""
	// Tap: VPP creates a tap v2 interface directly in the pod's
	// network namespace (needs /dev/vhost-net on the host).
	Tap Type = "tap"
	// AfPacket: the caller (the pod server) creates a veth pair,
	// moves one end into the pod's network namespace as AddPod.IfName and
	// keeps the other, AddPod.HostIfName, in the host namespace; VPP
	// attaches to that host end with af_packet. Works on every host.
	AfPacket Type = "af_packet"
	// Memif: a memif interface for a user-space application in
	// the pod; there is no kernel interface in the pod.
	Memif Type = "memif"
)

// TypeAnnotation is the pod annotation that selects the
// interface type of one pod ("tap", "af_packet" or "memif").
const TypeAnnotation = "vswitchkit.io/pod-interface-type"

// ParseType parses a pod interface type ("", "tap",
// "af_packet", "memif").
func ParseType(s string) (Type, error) {
	switch t := Type(s); t {
	case Default, Tap, AfPacket, Memif:
		return t, nil
	}
	return "", fmt.Errorf("podiface: unknown pod interface type %q (want tap, af_packet or memif)", s)
}

// Interface describes one interface that the handlers configured for a
// pod; they fill it in while processing AddPod. It tells the pod server
// what to configure inside the pod's network namespace after the commit.
type Interface struct {
	// HostName is the interface name inside the pod network namespace.
	HostName string
	// Type is the kind of the interface.
	Type Type
	// IPAddresses are the pod's addresses on it, in CIDR notation.
	IPAddresses []string
	// MAC is the MAC address of the pod's end of the interface (the pod
	// server sets it on a veth end it created; VPP sets it on a tap it
	// created); empty if not set.
	MAC string
	// GatewayMAC is the MAC address of VPP's end, for a static neighbor
	// entry of every route gateway in the pod, so the pod sends without
	// resolving the gateway first; empty if none is needed.
	GatewayMAC string
	// Socket is the memif control socket path for Memif.
	Socket string
}

// Route is a route that the pod server configures inside the pod.
type Route struct {
	Network string // CIDR; "0.0.0.0/0" or "::/0" for the default route
	Gateway string
}

// Attachment is what is known about one pod's attachment to the
// vswitch: the request of the AddPod that connected it. The pod server keeps
// these records durably; pod handlers rebuild the pods' configuration from
// them on a resync after a restart. It is a comparable value.
type Attachment struct {
	Pod              kubemodel.PodID
	ContainerID      string
	NetworkNamespace string
	IfName           string
	InterfaceType    Type
	HostIfName       string
}
