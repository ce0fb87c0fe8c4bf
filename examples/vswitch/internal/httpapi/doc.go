// Package httpapi serves the vswitch daemon's HTTP endpoint: Prometheus
// metrics read from the agent's component stats at every scrape (a
// registry of its own, no global state), liveness and readiness, and JSON
// debug views of the event loop, IPAM, nodes, services, VPP and BGP.
//
// # Endpoints
//
//	/metrics          Prometheus text format (see the daemon's README for the list)
//	/healthz          200 while the daemon runs; 503 once it stops, or while the
//	                  event loop misses its start-up resync
//	/readyz           200 once the agent is ready (start-up resync processed, node
//	                  ID known, VPP connected); 503 with the reason otherwise
//	/debug/events     the event loop's history (?n= the last n) and counters per event
//	/debug/ipam       the address plan, this node's pool and its allocations
//	/debug/nodes      the nodes node sync knows
//	/debug/services   the services as the service processor combined them, NAT44 stats
//	/debug/vpp        desired against applied value and status per VPP key
//	                  (?state=, ?kind=, ?prefix= filter)
//	/debug/bgp        the BGP controller's status, sessions (?routes=1 adds the
//	                  routes advertised to each peer)
//	/debug/bgp/status the node's BGP status as published (instances, peers,
//	                  timers, routes per family, conditions), learned routes
//
// # Lifecycle and concurrency
//
// [New] does no I/O. [Server.Run] listens and serves until its context
// ends. [Server.SetAgent] attaches the agent once it is open: until then
// /readyz and the debug views answer 503 with the daemon's phase (e.g.
// "logging in to etcd") and /metrics only has vswitchkit_ready and the Go
// runtime's metrics. Server is safe for concurrent use.
package httpapi
