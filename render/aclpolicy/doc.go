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
// # Sharing, stable lists and incremental changes
//
// VPP's ACL plugin (26.06) deletes every session of an interface when the
// interface's ACL list changes, and keeps them when an ACL of the list is
// replaced in place (acl_add_replace on its index). A session deleted
// under a connection that the policies still allow drops its replies
// until the pod that made the session sends again: a client waiting for
// its server hangs, a UDP answer in flight is lost. So no pod's ACL lists
// change while it has ACLs, and pods with equal rules still share one ACL
// (Contiv's cache design): each direction's list of a pod is two ACLs,
//
//   - its own (np-in-<interface>, np-out-<interface>), empty while its
//     rules are its group's;
//   - its group's shared ACL (np-gin-<interface>, np-gout-<interface>,
//     named after the pod that started the group; ReflectACL for the pods
//     that only need sessions).
//
// A pod joins the group with its rules (or starts one) when it gets ACLs
// and stays in it. When the rules of a group's pods change together — a
// peer comes or goes, a neighbour becomes egress-isolated, a policy of the
// deployment changes — the shared ACL's rules follow what most of its
// pods need, replaced in place: one request, whatever the number of pods.
// A pod whose rules part from its group's gets them in its own ACL,
// ending in a deny of everything so that the shared ACL is not reached,
// replaced in place too; it is emptied when its rules meet the group's
// again. A pod's lists appear when it gets ACLs (it had no sessions) and
// go when it needs none; an ACL no pod uses is deleted.
//
// Only the ACLs whose rules change and the lists that change are written.
// EgressACL, the exit interfaces' output ACL, keeps its name and is
// replaced in place. Sessions outlive a rule change: a connection
// established before a policy that denies it goes on (new ones are
// refused), as with conntrack-based implementations; one established
// while the pod had no ACL has no session and is judged as new by its
// next packet. After an agent restart the groups are formed again from
// the pods' rules, in pod order: a group may get another name (its first
// pod gone) and its pods' lists change once. Peers come aggregated from the
// processor (the fewest prefixes). The behaviour is verified with real
// packets by TestPacketsRealVPP.
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
