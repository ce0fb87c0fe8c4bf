// Package vppdriver is the reference southbound of the controller: a keyed
// desired-state reconciler that programs VPP over GoVPP
// (go.fd.io/govpp v0.13.0, binapi for VPP 25.10).
//
// The desired state is a set of keyed protobuf values from package
// [model]: interfaces (loopback, af_packet, tap v2, memif, routed VXLAN
// tunnels)
// with admin state, IP addresses and VRF binding; VRF tables; routes
// (multipath, via interface and/or next hop); NAT44-ED (plugin, interface
// features, address pools incl. twice-NAT, static, identity and
// load-balanced mappings with backends and affinity). [Driver] implements
// [controller.Southbound]: an update commit changes keys (nil deletes), a
// resync commit replaces the desired state and is reconciled against what
// VPP reports.
//
// # Reconciliation
//
// Every pass deletes, in reverse dependency order, what the driver owns but
// is no longer desired (or must be re-created because a creation-time field
// changed, or was left half-configured), together with everything applied
// on top of it; then it creates and updates, in dependency order (VRF
// tables, NAT44 plugin, interfaces, routes, NAT44 features, pools and
// mappings), what is desired and not yet as desired. An item whose
// dependencies (its VRF table, a route's outgoing interfaces and table, a
// NAT44 object's plugin and interface) are not configured is parked
// (StatePending, with the missing keys) and applied in the pass after they
// are. Failures are recorded per key (StateFailed, with the error and the
// attempt count); retriable ones (any VPP retval except INVALID_VALUE and
// NO_PATHS_IN_ROUTE) are retried with exponential backoff. Retvals meaning
// "already so" are success: IF_ALREADY_EXISTS on af_packet create (the
// existing sw_if_index is adopted), NAT44 "already enabled"/"already
// disabled", and on deletes INVALID_SW_IF_INDEX, NO_SUCH_ENTRY,
// NO_SUCH_FIB, ADDRESS_NOT_FOUND_FOR_INTERFACE and SYSCALL_ERROR_1
// (af_packet gone). VPP itself treats repeated route adds, table adds and
// route deletes as success.
//
// # Ownership
//
// The driver deletes only what it owns:
//   - interfaces: the VPP interface tag is Config.TagPrefix + name
//     ("vsk:" by default); interfaces without it are foreign;
//   - VRF tables: the table name is TagPrefix + label;
//   - NAT44 static, identity and load-balanced mappings: their tag is
//     TagPrefix; NAT44 features of owned interfaces are owned;
//   - the NAT44 plugin state and address pools have no tag: like routes in
//     foreign tables they are owned only if this driver instance applied
//     (or wants) their key;
//   - routes have no tag in VPP: a route is owned if it is in an owned
//     table, or if its key was applied by this driver instance (or is
//     desired). A route that a previous process applied in a foreign table
//     (e.g. table 0) and that is no longer desired is therefore kept after a
//     restart of the driver process (not of VPP, which loses all routes).
//
// # Connection
//
// Run connects with core.Connect on a fresh adapter, checks that VPP knows
// exactly the messages the driver uses (reporting the missing or changed
// ones in [ErrIncompatible]), reads the owned configuration back from VPP
// (interface, table, route, address, af_packet and tap dumps) and
// reconciles. The VXLAN, memif and NAT44-ED messages are checked
// separately: without them only those keys fail. memif control sockets
// are registered once per filename and left registered when their last
// memif goes. A failed send, a reply missing its deadline or a failed
// control_ping health probe drop the connection; Run reconnects and
// resyncs. Bulk changes are pipelined: the calls of one stage of all items
// of one kind go out on a stream in windows of Config.Window requests, then
// their replies are read in order; every window and dump runs under a
// context deadline of Config.RequestTimeout. Dumps are pipelined the same
// way (dump, control_ping) and read as they arrive. When the caller's
// context ends during a pass, no further request is sent but the replies
// to those already sent are read (under their own deadline), so the driver
// always knows what VPP did; the unfinished keys fail with the context's
// error and are retried (a half-created interface is re-created).
//
// # Concurrency
//
// Driver is safe for concurrent use. One mutex serializes Commit, retries
// and resyncs (it is held during VPP I/O); Status and Statuses read a
// separately locked snapshot and do not wait for a pass.
//
// # Lifecycle
//
// [New] does no I/O and starts no goroutine. [Driver.Run] owns the
// connection, the health probe and the retry timer, and returns (having
// disconnected) when its context ends. Commit works without Run: values are
// recorded and applied once Run has connected.
package vppdriver
