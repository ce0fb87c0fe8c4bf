package cniserver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"slices"

	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/controller/podiface"
)

// AttachmentID identifies an attachment of a container to a network, as
// the CNI specification does: (CNI_CONTAINERID, CNI_IFNAME). It is an
// immutable, comparable value and can be used as a map key.
type AttachmentID struct {
	ContainerID string
	IfName      string
}

// String returns "containerID/ifName".
func (id AttachmentID) String() string { return id.ContainerID + "/" + id.IfName }

// Attachment is what the server knows about one pod attachment; it keeps
// one per ADD in its [Store] until the DEL (or GC) of the attachment.
//
// A pod handler may rebuild its desired state from [Server.Attachments] on
// a resync: the attachments that are Ready are connected pods.
//
// It is a plain value; use Clone before modifying a shared one.
type Attachment struct {
	ID AttachmentID
	// Network is the name of the network configuration (its "name").
	Network string
	// Pod is the pod, from the K8S_POD_NAMESPACE and K8S_POD_NAME CNI_ARGS.
	Pod kubemodel.PodID
	// Netns is the pod's network namespace path (CNI_NETNS).
	Netns string
	// Type is the requested interface type until the ADD finished, then
	// the type the handlers connected. podiface.Default while the
	// handlers have not chosen yet.
	Type podiface.Type
	// HostIfName is the host end of the veth pair, for af_packet (and while
	// the handlers choose, for podiface.Default); empty otherwise.
	HostIfName string
	// HostMAC is the MAC address of HostIfName, once known.
	HostMAC string
	// Interfaces and Routes are the handlers' results (AddPod), with the
	// MAC of each kernel interface filled in as configured.
	Interfaces []podiface.Interface
	Routes     []podiface.Route
	// Ready is true once the ADD completed: the handlers connected the pod
	// and its namespace is configured. An attachment that is not Ready is
	// an ADD in progress or one that was interrupted (by an agent restart);
	// the runtime's DEL, or GC, removes it.
	Ready bool
}

// Clone returns a deep copy of a.
func (a Attachment) Clone() Attachment {
	a.Interfaces = slices.Clone(a.Interfaces)
	for i := range a.Interfaces {
		a.Interfaces[i].IPAddresses = slices.Clone(a.Interfaces[i].IPAddresses)
	}
	a.Routes = slices.Clone(a.Routes)
	return a
}

// Store keeps the server's attachments durably, so that DEL, CHECK, GC and
// a repeated ADD work after an agent restart. [OpenBoltStore] keeps them in
// a bbolt file in the agent's state directory; cniservertest.MemStore in
// memory (for tests: an agent restart loses them).
//
// # Contract
//
// The server calls the methods from its request goroutines, for different
// attachments concurrently; the implementation must be safe for concurrent
// use. PutAttachment must be durable when it returns nil: the server
// creates Linux and VPP state only after the record of it is stored. Put
// replaces the record of the same ID; Delete of a missing record is not an
// error. An error fails the request (Put, List) or leaves the record for
// a later DEL or GC (Delete). Values passed in and returned are owned by
// the receiver.
type Store interface {
	PutAttachment(ctx context.Context, a Attachment) error
	DeleteAttachment(ctx context.Context, id AttachmentID) error
	ListAttachments(ctx context.Context) ([]Attachment, error)
}

// Name prefixes of the links the server creates in the host namespace.
const (
	// HostIfPrefix starts the name of every veth host end.
	HostIfPrefix = "vsk"
	// peerIfPrefix starts the name of a veth pod end while it is in the
	// host namespace.
	peerIfPrefix = "vsp"
)

// HostIfName returns the name of the veth host end of the attachment
// (containerID, ifName): "vsk" followed by the first 12 hex digits of the
// SHA-256 of "containerID/ifName" (15 bytes, the kernel's limit). The name
// depends only on its arguments, so a DEL after an agent restart finds the
// veth without any state, and the VPP stand-in or a pod handler can tell
// the name ahead of time.
func HostIfName(containerID, ifName string) string {
	return HostIfPrefix + idHash(containerID, ifName)
}

// peerIfName is the name of the pod end while it is in the host namespace.
func peerIfName(containerID, ifName string) string {
	return peerIfPrefix + idHash(containerID, ifName)
}

func idHash(containerID, ifName string) string {
	sum := sha256.Sum256([]byte(containerID + "/" + ifName))
	return hex.EncodeToString(sum[:6])
}
