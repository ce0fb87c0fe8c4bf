// Package ipam computes the per-node address plan of a vswitchkit cluster
// and allocates pod IP addresses.
//
// A single [IPAM] is responsible for all node-local allocations. IPAMs of
// different nodes do not talk to each other: the cluster-wide unique node ID
// (from a [NodeIDSource], e.g. nodesync) selects each node's slice of the
// shared ranges, so nodes never collide.
//
// # Address plan
//
// From the [Config] and the node ID n, IPAM derives:
//
//   - this node's pod subnet: slice number n (of PodSubnetOneNodePrefixLen)
//     of PodSubnetCIDR; its first address after the network address is the
//     pod gateway, and pods get the addresses between the gateway and the
//     broadcast address. With the defaults node 5 gets 10.1.5.0/24, gateway
//     10.1.5.1, pod IPs 10.1.5.2–10.1.5.254 (253 addresses);
//   - this node's VPP-to-host link: slice n of VPPHostSubnetCIDR, VPP end
//     .1, Linux end .2 (172.30.5.1 and 172.30.5.2 for node 5); the NAT
//     loopback address is the last address before the broadcast address of
//     this slice (172.30.5.254), so it never takes a pod address;
//   - node interconnect IPs: network address of NodeInterconnectCIDR plus
//     the node ID (192.168.16.5/24), skipping the configured default
//     gateway; VXLAN IPs likewise in VXLANCIDR (192.168.30.5/24);
//   - the service range, ServiceCIDR.
//
// IPv4 and IPv6 work alike ("broadcast" means the last address of a subnet
// in both). The single-CIDR mode carves all ranges from one block (see
// Config.SingleCIDR). In external IPAM mode (Config.ExternalIPAM) this
// node's pod subnet is the pod CIDR Kubernetes assigned to the node object
// (kubemodel.Node.PodCidrs); when it changes IPAM pushes a [PodCIDRChange].
//
// New validates the configuration once (unparsable or overlapping ranges,
// per-node prefixes not longer than their range, ranges too small); Resync
// validates the node ID against every range once (beyond a range's
// capacity, a node IP that would be the broadcast address or fall outside
// its subnet). Errors name the field, the value and the reason.
//
// # Pod IP allocation
//
// AllocatePodIP is idempotent per pod and allocates next-after-last: the
// search for a free address starts after the last allocated one and wraps
// around, so a released address is reused only after wrap-around. The used
// addresses are kept in a sparse chunked bitmap (4096 addresses per chunk,
// a chunk exists only while it holds an allocation) whose memory is
// proportional to the number of pods, not to the size of the subnet, so an
// IPv6 slice with 64 or more host bits costs the same as an IPv4 /24. The
// search skips 64 addresses per machine word and a full chunk in one step;
// an allocation is O(1) amortised and at worst a scan of the chunks in use.
// In slices with more than 2^64 addresses only the first 2^64 are used.
// Exhaustion returns an error wrapping [ErrPoolExhausted].
//
// IPAM is a [controller.EventHandler]. It allocates on AddPod (and releases
// again on Revert of that AddPod) and releases on DeletePod; because
// DeletePod flows in reverse, IPAM — registered early — releases the address
// after the handlers that use it have torn the pod down. When a pod is
// deleted from the Kubernetes state while IPAM still holds the address the
// deleted object had, IPAM releases it too (it was recovered from a state
// that lagged behind a CNI DEL) — unless a known sandbox holds it: that may
// be the sandbox of a pod re-created under the same name, and the address
// stays with it until its own DEL (see Sandboxes).
//
// # Sandboxes
//
// An address belongs to a pod (namespace/name), and IPAM records which of
// the pod's sandboxes holds it: the container ID of the AddPod that
// allocated it ([Allocation.ContainerID]). Kubelet re-creates a pod's
// sandbox under a new container ID, and the CNI DEL (or CNI GC) of the old
// sandbox can arrive after the CNI ADD of the new one. The AddPod of the
// new sandbox gets the pod's address and becomes its holder; the late
// DeletePod of the old sandbox then leaves the address alone instead of
// handing the running pod's address to the next pod. A DeletePod without
// a container ID, or any DeletePod while the holder is unknown (pods
// recovered from the Kubernetes state, allocations through the direct
// API), releases as before; see [IPAM.Update] for the rules. The direct
// API (AllocatePodIP, AllocatePodAddr, ReleasePodIP) takes no container
// IDs: it allocates with an unknown holder and releases whatever sandbox
// holds the address. The holder is persisted with the allocation, so it
// survives restarts when a Store is configured.
//
// # Persistence
//
// Allocations survive a restart: Resync recovers them from the allocations
// in memory, the records of the optional [Store], and the pod IPs of the
// Kubernetes state, which lags behind, in that order of precedence (see
// [IPAM.Resync]): an address a pod holds is never moved to another pod.
// The holding sandbox comes with the allocation that wins (the Kubernetes
// state knows none).
// With a Store, every allocation is written to it before AllocatePodIP
// returns, so an address allocated just before a crash, not yet reflected
// in the Kubernetes state, is not handed out twice, and a pod whose
// address changed just before a crash keeps its new address. A failed
// Store call leaves the outcome unknown (the write may have been applied):
// IPAM then keeps the address reserved for the pod until a later call
// settles the record, and deletes the records of released pods. Missing
// input (external IPAM before this node's pod CIDR is known) never
// destroys records: allocation waits with [ErrNotReady].
//
// Which Store to use:
//
//   - [github.com/vswitchkit/vswitchkit/ipam/etcdstore] keeps the records in
//     etcd under /vswitchkit/ipam/<node>/<namespace>/<name>, one fenced
//     transaction per allocation; two agents started with the same node
//     name cannot both write. The records survive the loss of the node's
//     disk. Use it when nodes may be re-imaged or their local disk is not
//     durable. It costs an etcd round trip (and quorum write) per
//     allocation and release, and allocation stops while etcd is
//     unreachable.
//   - [github.com/vswitchkit/vswitchkit/ipam/boltstore] keeps them in a
//     local bbolt file (one fsync per allocation; the file lock keeps a
//     second agent process off it). Use it when etcd latency or
//     availability matter more and the state directory survives restarts
//     and re-images; if the file is lost, so is the protection.
//
// Either way every allocation costs a durable write; without a Store
// (the zero Config, for tests and experiments) allocation is a few hundred
// nanoseconds but the allocations are recovered from the Kubernetes state
// only, which is enough for a restart but not for a crash between
// allocation and reflection: the addresses of such pods are handed out
// again (IPAM logs a warning at the first Resync). Nor do the holding
// sandboxes survive a restart without a Store: a CNI DEL of a sandbox
// replaced before the restart releases the pod's address. After a restart the
// allocator continues after the highest recovered address.
//
// # Concurrency
//
// [IPAM] is safe for concurrent use, with one rule whatever the
// configuration: the operations that change the allocations (Resync,
// Update, Revert, AllocatePodIP and ReleasePodIP) run one at a time, each
// with its Store I/O, so an allocation waits for a running Resync and
// vice versa. The getters take the same mutex only to read; an operation
// releases it while it waits for the Store, so the getters never wait for
// the Store, only while a Resync rebuilds the allocations (a few
// milliseconds for 65k pods), and they never see a half-built state.
//
// # Lifecycle
//
// New does no I/O and starts no goroutines; IPAM has no Run method and
// nothing to close. It becomes fully usable with the first successful
// Resync (the node ID is only known then); before it, node-specific
// getters return nil and allocation returns [ErrNotReady].
package ipam
