// Package aclpolicy renders the effective NetworkPolicies of this node's
// pods (package policy) onto VPP's ACL plugin: stateful ACLs
// (permit+reflect) applied to the pods' interfaces and to the interfaces on
// which traffic leaves the node.
//
// # Where each rule is checked
//
// VPP's input ACL on a pod's interface runs before NAT44 translates a
// service address to a backend, and its output ACLs after it; its NAT
// output feature on the uplink translates pod sources before the uplink's
// output ACL. NetworkPolicy is about the real backend pod and the real
// client, so the renderer places each check where VPP sees them:
//
//   - A pod's input ACL (what it sends) holds its egress rules for every
//     destination but the service frontends (Config.ServicePrefixes),
//     which it permits; if the pod is not egress-isolated it permits
//     everything. Every rule creates a session, so the replies of what
//     the pod started come back whatever its output ACL says.
//   - A pod's output ACL (what it receives) permits the node's own
//     addresses (Config.HostPrefixes: kubelet probes, host-network pods,
//     a pod reaching itself through a service, which then arrives from
//     the service renderer's NAT address), then, for each egress-isolated
//     pod of the node, the ports that both that pod's egress rules and
//     this pod's ingress rules allow between them and a deny of the rest
//     (the service case: the check after translation), then the pod's
//     ingress rules; what matches nothing is denied.
//   - The exit interfaces (Config.ExitInterfaces: tunnels, the host
//     interconnect, the uplink) get one shared output ACL, EgressACL, with
//     the egress rules of every egress-isolated pod of the node, keyed by
//     its address, then a permit of everything else: the check after
//     translation for connections to backends on other nodes. Their input
//     ACL, ReflectACL, creates the sessions that let the replies of
//     connections from other nodes out again.
//
// A pod without any isolation, and not restricted by another local pod's
// egress, gets no ACL at all: its traffic pays nothing.
//
// # Stable lists and incremental changes
//
// VPP's ACL plugin (26.06) deletes every session of an interface when the
// interface's ACL list changes, and keeps them when an ACL of the list is
// replaced in place (acl_add_replace on its index). A session deleted
// under a connection that the policies still allow drops its replies
// until the pod that made the session sends again: a client waiting for
// its server hangs, a UDP answer in flight is lost. So the lists of an
// interface never change while it has ACLs: every pod interface with ACLs
// has two of its own, named after it (np-in-<interface>,
// np-out-<interface>), and a change of its rules — its policies, its
// peers, a neighbour becoming egress-isolated — replaces their rules in
// place; only the ACLs whose rules change are written. The lists change
// when a pod gets ACLs (it had no sessions) or loses them (it needs
// none). Pods with equal rules therefore have equal ACLs, not one shared
// ACL: VPP holds their rules once per pod. EgressACL and ReflectACL, the
// exit interfaces' lists, are shared and keep their names too. Sessions
// outlive a rule change: a connection established before a policy that
// denies it goes on (new ones are refused), as with conntrack-based
// implementations; one established while the pod had no ACL has no
// session and is judged as new by its next packet. Peers come aggregated
// from the processor (the fewest prefixes). All of this is verified with
// real packets by TestPacketsRealVPP.
//
// # Limits
//
// A connection from a pod to an external or load-balancer IP of a
// service, or to a NodePort on a node address, is checked against the
// pod's egress rules with that address, before translation (only the
// service CIDRs are deferred). IPv6 neighbor discovery (ICMPv6 types
// 133-136) is always permitted.
//
// Traffic that the service renderer twice-NATs arrives from the NAT
// loopback address, one of the node's own addresses, and is allowed as
// traffic from the node: a pod reaching itself through a service, and
// every connection to a NodePort, external or load-balancer IP of a
// service with the Cluster external traffic policy — an ingress-isolated
// backend accepts those from anywhere, as kube-proxy's source NAT makes
// them node traffic elsewhere. With the Local policy the backend sees the
// client's address and its ingress rules decide (both verified with real
// packets by TestPacketsRealVPP).
package aclpolicy
