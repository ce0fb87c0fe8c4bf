// Package cniserver is the agent side of the vswitchkit CNI plugin: a
// server, started by the agent, that turns the container runtime's CNI
// requests (specification 1.1: ADD, DEL, CHECK, GC, STATUS; the plugin
// answers VERSION) into blocking AddPod and DeletePod events of the
// controller's event loop, and configures the pod's side of its interface
// in the pod's network namespace. The plugin binary (package cniplugin,
// examples/vswitchkit-cni) forwards each request over a unix socket; it
// keeps no state.
//
// # Usage
//
//	store, err := cniserver.OpenBoltStore(filepath.Join(stateDir, "cni.db"))
//	defer store.Close()
//	srv, err := cniserver.New(loop, linuxpod.New(), store, cniserver.Config{
//		InterfaceType: podiface.AfPacket,
//		Ready: func(context.Context) error { // STATUS
//			select {
//			case <-loop.Ready(): // the start-up resync was processed
//				return nil
//			default:
//				return errors.New("no start-up resync yet")
//			}
//		},
//		Logger: log,
//	})
//	// in an errgroup with loop.Run:
//	err = srv.Run(ctx)
//
// # ADD
//
// The pod is named by the CNI_ARGS K8S_POD_NAMESPACE and K8S_POD_NAME
// (kubelet passes them). The interface type is Config.InterfaceTypeFor's
// answer for the pod, else Config.InterfaceType. The server records the
// attachment in its [Store] before it creates anything, then:
//
//   - af_packet: it creates a veth pair, host end [HostIfName] (a name
//     derived from the container ID and CNI_IFNAME only, so a DEL finds it
//     after an agent restart without any state), pod end moved into the
//     pod's namespace as CNI_IFNAME, and pushes AddPod with InterfaceType
//     af_packet and HostIfName set;
//   - tap: it pushes AddPod; VPP creates the tap in the namespace;
//   - memif: it pushes AddPod; there is no kernel interface;
//   - podiface.Default (nothing decided the type): the pod handler
//     chooses. Since VPP attaches af_packet to a host interface that must
//     already exist, the server prepares the veth pair with both ends in
//     the host namespace and passes its HostIfName; if the handlers chose
//     af_packet it then moves the pod end into the namespace, otherwise it
//     deletes the pair. Set Config.InterfaceType when the type is known, to
//     save that work.
//
// AddPod is pushed with the pod, container, namespace, IfName, interface
// type, HostIfName and, with a delegated IPAM plugin, IPAMType/IPAMData.
// Once the loop committed it, the server configures each kernel interface
// the handlers returned (AddPod.Interfaces): its MAC (if given), MTU,
// addresses; on the interface named CNI_IFNAME also AddPod.Routes (the
// default route via the gateway) and a permanent neighbor entry with
// GatewayMAC for every gateway, so the pod sends without resolving VPP's
// MAC; then it brings it up. It records the attachment as Ready and
// returns the result: the veth host end, the pod's interfaces (with
// sandbox and, for memif, socketPath), every address with the gateway of
// its family, the routes, and the DNS settings of the network
// configuration, appended to a prevResult when the plugin is chained, in
// the configuration's cniVersion.
//
// An ADD of a Ready attachment returns its result again. An ADD that fails
// leaves nothing behind: a failing handler makes the loop revert the
// handlers that ran (IPAM releases the address) and nothing is committed;
// a failure after the commit (the namespace configuration, the store)
// pushes DeletePod; the veth and the record are removed. If the request
// ends (the plugin timed out) while AddPod waits in the loop, the server
// undoes the attachment once the loop answered, holding the attachment
// until then.
//
// # DEL, CHECK, GC, STATUS
//
// DEL pushes DeletePod for the recorded attachment, deletes the veth and
// the record. It is idempotent: an unknown attachment is a success (its
// veth, found by name, is deleted if the store lost the record); a
// missing namespace does not matter. CHECK compares the pod's interfaces
// in the namespace with the record: the link up, its MAC and MTU, the
// addresses, routes and gateway neighbor entries present (more is
// allowed), the veth host end up, and the prevResult's addresses of
// CNI_IFNAME equal to the agent's. GC removes, like DEL, every recorded
// attachment of the network that cni.dev/valid-attachments does not list,
// except those with a request in progress. STATUS calls Config.Ready.
//
// # Errors
//
// Errors are CNI errors (code, message, details): 1 unsupported
// cniVersion; 3 CHECK of an unknown attachment, or an ADD whose network
// namespace does not exist; 4 a missing or bad parameter (CNI_NETNS,
// CNI_ARGS without the pod); 6 an undecodable configuration; 7 a bad
// field of the configuration, or of the pod's (an interface type that
// Config.InterfaceTypeFor rejects); 11 try again later (the loop's queue is
// full or it stops, a timeout, a DEL or GC whose DeletePod failed); 50 and
// 51 from STATUS; [CodeCheckFailed] (100) a CHECK mismatch;
// [CodeAddFailed] (101) an ADD that failed in a handler or in the
// namespace (the interface name is taken, the handlers returned no usable
// result). The plugin adds its own (package cniplugin).
//
// # Restart safety
//
// The attachments live in the [Store] ([OpenBoltStore]: a bbolt file in
// the agent's state directory), written before every side effect and after
// it completed. After an agent restart, DEL, CHECK, GC and a repeated ADD
// work as before; an ADD that a restart interrupted is completed by the
// runtime's next ADD (every step is idempotent) or removed by its DEL.
// Pods keep working across a restart when the pod handler rebuilds its
// desired state on the start-up resync, e.g. from [Server.Attachments] (or
// from the Kubernetes state), and IPAM recovers its allocations.
//
// # Concurrency
//
// [Server] is safe for concurrent use. Each request runs on its own
// goroutine; requests of one attachment (container ID, CNI_IFNAME) are
// serialised, others run concurrently (their AddPod and DeletePod events
// are serialised by the event loop). [Server.Attachments] may be called
// from a handler's Resync on the loop goroutine: it never waits for the
// loop.
//
// # Lifecycle
//
// [New] validates and returns; it does no I/O and starts no goroutine.
// [Server.Run] loads the store, serves the socket until its context ends,
// then stops accepting, lets requests in progress finish, waits until the
// loop answered the events they pushed (a running loop answers every
// event, a stopping one fails them), removes the socket and returns
// ctx.Err().
// Run the loop and the server with the same context (e.g. in an
// errgroup).
package cniserver
