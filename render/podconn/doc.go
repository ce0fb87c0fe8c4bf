// Package podconn is the pod connectivity handler of a vswitch agent: a
// controller.EventHandler that connects pods to VPP on AddPod, disconnects
// them on DeletePod and rebuilds them on every resync, as keyed
// vppdriver/vppmodel values in the loop's transaction. It never talks to VPP
// itself.
//
// # What a pod gets
//
// The pod's address comes from IPAM (its handler runs first and allocates
// it); the pod gateway is IPAM's PodGatewayAddr, held by one loopback
// (vpp/interface/pod-gw, the gateway address as a host prefix). Per pod:
//
//	vpp/interface/pod-<h>               the pod's VPP interface, unnumbered to the gateway loopback,
//	                                    MAC 02:fe:<h>
//	vpp/neighbor/pod-<h>/<pod IP>       static neighbor: the pod's MAC 02:fd:<h> (af_packet and tap)
//	vpp/route/0/<pod IP>/32             host route through the interface
//
// In a dual-stack cluster ([Config].DualStack: the second family's IPAM)
// a pod has an address of each family on its one interface, each with its
// neighbor and host route, the gateway loopback holds both families' pod
// gateways, and the pod's results carry both addresses and a default
// route of each family.
//
// where <h> is derived from the container ID and the interface name, so
// that an attachment gets the same names and MACs after every restart
// (and a re-created sandbox new ones). The interface type is the AddPod's
// InterfaceType, else the pod's annotation
// podiface.TypeAnnotation, else [Config].InterfaceType. An annotation that
// names no interface type ("carrier-pigeon") is not replaced by another
// type: the pod's AddPod, and [Handler.InterfaceTypeOf] which the pod
// server asks first, fail with an [AnnotationError] naming the annotation
// and the value (the ADD fails, kubelet retries it) until the annotation
// is fixed; the value is logged at Warn once per pod. A pod attached
// before its annotation went bad stays as it is. The types:
//
//   - af_packet: VPP attaches to AddPod.HostIfName, the host end of the
//     veth pair the pod server made (works on every host);
//   - tap: VPP creates a tap v2 interface in the pod's network namespace,
//     named AddPod.IfName, with the pod's MAC and address (needs
//     /dev/vhost-net on the host);
//   - memif: a memif master on a socket of its own under
//     [Config].MemifSocketDir, for a user-space application in the pod.
//
// AddPod's results say what the pod side needs: one PodInterface
// (HostName = IfName, the pod's address as a host prefix, MAC = the pod
// side's MAC to set (af_packet: on the veth end; tap: already set by VPP),
// GatewayMAC = VPP's side, Socket for memif) and the default route via the
// gateway. The pod server configures the address, a link route to the
// gateway, the default route and a static neighbor entry for the gateway:
// then neither side needs ARP or IPv6 neighbor discovery (which VPP does
// not run on an unnumbered interface), and traffic between pods of one
// node goes through VPP. Verified with packets on VPP 26.06 (see the
// tests).
//
// # Restarts and failures
//
// A failed AddPod (a later handler failing) is reverted: the handler
// forgets the pod and takes its results back; nothing was committed, so
// VPP holds nothing of it, and IPAM's Revert releases the address. A
// resync rebuilds every pod from [Config].Attachments (the pod server's
// durable records), so a VPP restart (the driver re-applies the desired
// state) or an agent restart (the same keys and values: the driver finds
// them in VPP and writes nothing) restores every pod. Without
// Attachments, a restarted agent knows no pod until it is added again.
//
// A tap pod's Linux side is re-created by VPP after a VPP restart, with its
// MAC and address but without the routes and the gateway's neighbor entry
// the pod server added (VPP cannot add a gateway outside the pod's /32): the
// pod server must configure it again. A pod's IPv6 address needs the static
// neighbors (af_packet and tap); memif pods resolve their gateway with ARP
// (IPv4 only).
//
// # Register order
//
// After IPAM, before the service processor's handler (which asks
// [Handler.PodInterface] for the interface of a new pod): nodesync, ipam,
// nodeaddr.NodeIPSet, nodeconn, podconn, the service processor.
//
// # Concurrency
//
// [Handler] is safe for concurrent use; the loop calls it on its goroutine.
//
// # Lifecycle
//
// [New] does no I/O and starts nothing; the handler works inside the
// controller loop. It handles no Shutdown: pods stay connected while the
// agent restarts.
package podconn
