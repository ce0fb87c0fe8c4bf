// Package httpapi serves the vswitch daemon's HTTP endpoint: Prometheus
// metrics read from the agent's component stats at every scrape (a
// registry of its own, no global state), liveness and readiness, and JSON
// debug views of the event loop, IPAM, nodes, services, VPP and BGP.
//
// # Endpoints
//
//	/metrics          Prometheus text format (see the daemon's README for the list)
//	/healthz          200 while the daemon runs: "ok", or "ok (degraded)" and a line
//	                  per problem; 503 once it stops, or while the event loop
//	                  misses its start-up resync
//	/readyz           200 once the agent is ready (start-up resync processed, node
//	                  ID known, VPP connected); 503 with the reason otherwise
//	/debug/           the index of the debug views: path, what it shows, query parameters
//	/debug/events     the event loop's history (?n= the last n) and counters per event
//	/debug/ipam       the address plan, this node's pool and its allocations
//	/debug/nodes      the nodes node sync knows
//	/debug/services   the services as the service processor combined them, the
//	                  renderer's stats (NAT44, or cnat with its problems)
//	/debug/vpp        desired against applied value and status per VPP key
//	                  (?state=, ?kind=, ?prefix= filter; an unknown state or kind
//	                  answers 400 with the valid ones)
//	/debug/bgp        the BGP controller's status, sessions (?routes=1 adds the
//	                  routes advertised to each peer)
//	/debug/bgp/status the node's BGP status as published (instances, peers,
//	                  timers, routes per family, conditions), learned routes
//
// # Degraded
//
// What the agent cannot apply makes it degraded: keys the loop rejected for
// good and its healing resyncs failing in a row (controller.Loop.Healthy:
// etcd or VPP failing; the loop keeps healing), VPP keys that keep failing
// (vppdriver.Driver.Degraded) and malformed parts of services the service
// processor skipped (svcprocessor.ServiceProcessor.Skipped), and with the
// cnat renderer the parts of services and pods' hostPorts it does not
// render (svccnat.Renderer.Problems: an unknown lb annotation, a family
// without a node address, a frontend or hostPort taken by another). /healthz
// names each and still answers 200, and /readyz is unaffected: the agent
// runs and serves its other pods, and restarting it would not help. The
// metric vswitchkit_degraded is 1 meanwhile; vswitchkit_loop_rejected_keys,
// vswitchkit_loop_healing_failing, vswitchkit_vpp_failing_keys (per kind) and vswitchkit_services_skipped
// (per reason) and vswitchkit_cnat_problems (per reason) count them, and vswitchkit_watcher_skipped_total counts the
// values in etcd the watcher could not decode, per resource.
//
// # Lifecycle and concurrency
//
// [New] does no I/O. [Server.Listen] binds the address (the daemon calls
// it before anything else starts); [Server.Run] serves until its context
// ends. [Server.SetAgent] attaches the agent once it is open: until then
// /readyz and the debug views answer 503 with the daemon's phase (e.g.
// "logging in to etcd") and /metrics only has vswitchkit_ready and the Go
// runtime's metrics. Server is safe for concurrent use.
package httpapi
