// Package svcprocessor turns Kubernetes services and endpoints into one
// combined view per service ([ContivService]) and delivers changes of those
// views to pluggable renderers ([ServiceRendererAPI]).
//
// A service is paired with the endpoints of the same namespace/name; service
// ports and endpoint ports match by name and protocol (TCP, UDP and SCTP are
// kept distinct). Ready addresses become a port's Backends, not-ready ones
// its NotReadyBackends. Each backend is marked local (in this node's pod
// subnet, or on this node by name) and/or host-network (outside the cluster
// pod subnet). The view also carries cluster IPs (none for headless
// services), external and load-balancer IPs, node ports, the external and
// internal traffic policies and the ClientIP session affinity timeout.
//
// Besides services, the processor keeps two sets of local VPP interfaces:
// backends (interfaces of local pods that back at least one service) and
// frontends (all other connected local pods plus [Config.FrontendInterfaces]).
// AddPod and DeletePod keep them right, also when a pod becomes a backend
// before its AddPod arrives, and when kubelet replaces a pod's sandbox: a
// late DeletePod of the old sandbox (its container ID differs from the one
// of the AddPod that connected the pod) leaves the pod connected.
//
// What the processor needs from other components comes through small
// interfaces: [PodSubnets] (the IPAM, through [SubnetsFromIPNet]),
// [NodeIPs] and [PodInterfaces]. Package svcprocessortest has fakes for them
// and a recording renderer.
//
// # Renderers
//
// Renderers receive, in registration order, one [RenderEvent] per change:
// a service added, updated or deleted (with all services readable through
// [ServiceView]), node IPs changed, frontend or backend interfaces changed,
// and a full [Snapshot] on resync. A renderer error is returned to the
// caller as [RendererError]; the processor's state keeps the change and the
// other renderers are notified anyway, so a later resync makes everyone
// consistent again.
//
// # Bad input
//
// The key of a Kubernetes state value names the service; the value must be
// of the resource's type and name the same namespace/name (or none). A
// change that breaks this is rejected: nothing changes and Update returns a
// [controller.KeyError] for the key, wrapping [ErrUnexpectedValue]. Resync
// skips such values, applies the rest and returns their KeyErrors (joined).
// The event loop records a KeyError without scheduling a healing resync (a
// resync would find the same value) and reports the key through
// controller.Loop.Healthy and RejectedKeys until a change of that key is
// accepted. Malformed parts inside an otherwise valid service (an
// unparsable IP, a port out of range, also when it is the service's only
// port) are skipped: each is logged at Warn once, when it appears (not at
// every recomputation of the service), counted per reason in
// [ServiceProcessor.Stats] and listed, as a [SkippedError], by
// [ServiceProcessor.Skipped] until the service is fixed or deleted.
//
// # Incremental work
//
// Services are indexed by ID, services with node ports and local endpoints
// by their own indexes. One change of a service or its endpoints recomputes
// that service only and diffs it against its previous view; no operation
// other than Resync and [ServiceProcessor.Snapshot] visits all services.
//
// # Concurrency
//
// [ServiceProcessor] is safe for concurrent use; in practice one goroutine,
// the controller event loop, drives it through [ServiceProcessor.Handler].
// Renderers are called with the processor's lock held and must not call back
// into the processor. Published [ContivService] values and snapshots are
// immutable.
//
// # Lifecycle
//
// [New] does no I/O and starts no goroutines; the processor is usable at
// once, with an empty state. Register renderers, then feed it a Resync (the
// controller's start-up DBResync) and updates. [ServiceProcessor.Close]
// drops the state; later calls return [ErrClosed]. The package starts no
// goroutines.
//
// # Compared with the reference API
//
// [ServiceProcessorAPI] declares the reference interface (Update, Resync,
// RegisterRenderer) over this module's event types, and [ServiceProcessor]
// implements it. The reference's plugin lifecycle is gone: there is no
// Deps struct, Init or AfterInit. What Init did (take dependencies, build
// the empty cache) is [New], with the dependencies as arguments and the
// options in [Config]; what AfterInit did (wait for the rest of the agent,
// then start) is the application's order of calls: build the processor,
// register renderers, register [ServiceProcessor.Handler] with the event
// loop, and let the loop's start-up DBResync deliver the first Resync.
// Close is [ServiceProcessor.Close].
package svcprocessor
