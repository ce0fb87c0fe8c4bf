// Package vppdriver is the reference southbound of the controller: a keyed
// desired-state reconciler that programs VPP over GoVPP
// (go.fd.io/govpp v0.13.0, binapi for VPP 25.10).
//
// The desired state is a set of keyed protobuf values from package
// [vppmodel]: interfaces (loopback, af_packet, tap v2 (in a network namespace,
// with the Linux side's MAC, addresses and gateways), memif, routed VXLAN
// tunnels carrying IPv4 or IPv6, and existing interfaces such as DPDK NICs,
// adopted by their VPP name) with admin state, IP addresses or the
// addresses of another interface (unnumbered), and VRF binding; static IP
// neighbors; VRF tables; routes (multipath, via interface and/or next
// hop); NAT44-ED (plugin with forwarding, inside/outside and output
// (post-routing) interface features, address pools incl. twice-NAT and
// pools that follow an interface's address, static, identity and
// load-balanced mappings with backends and affinity); ACLs of VPP's ACL
// plugin and the ordered input and output ACL lists of interfaces; the
// cnat plugin's translations (both families), its source NAT (addresses,
// excluded prefixes, policy) and cnat on interfaces (the feature, the
// SNAT policy's interface tables). [Driver] implements
// [controller.Southbound]: an update commit changes keys (nil deletes), a
// resync commit replaces the desired state and is reconciled against what
// VPP reports.
//
// # Keys and invalid values
//
// The driver owns exactly the keys under [vppmodel.KeyRoot] ("vpp/") and
// says so with [Driver.OwnsKey] ([controller.KeyOwner]); every other key
// of a commit is ignored, in every kind of commit: it belongs to another
// southbound or to handlers' bookkeeping, and a resync never removes,
// counts or reports it.
//
// Every value is validated ([vppmodel.KeyOf]) and converted, when it is
// committed, into a typed form (netip addresses, defaults filled in, lists
// sorted) that the driver keeps and works from: no string of a value is
// parsed after the commit, and a message committed again unchanged (the
// same pointer: values are immutable) is not looked at again. A value that fails validation (say an
// unparsable IP address in external configuration) is rejected for its
// key alone: Commit applies every other key of the transaction and
// returns a [*controller.KeyError] for it; the key's status is
// StateFailed with the error (wrapping [ErrInvalidValue]); it is not
// retried and it is counted in [Stats]. An invalid value replaces the
// key's previous desired value: the key no longer has a value VPP could
// hold, so an object applied for an earlier, valid value is removed (and
// what depends on it waits), exactly as after an agent restart, where the
// driver has no memory of earlier values. A later valid value (or a
// delete) clears the error.
//
// # Reconciliation
//
// A pass deletes, in reverse dependency order, what the driver owns but
// is no longer desired (or must be re-created because a creation-time
// field changed, or was left half-configured), together with everything
// applied on top of it, except what stops referring to it by an in-place
// change: a deletion waits for the changes that stop referring to the
// object, which are made first (a route moved to another interface
// before the old interface goes, with no moment without the route); it
// holds when the pass makes all of them (else what refers to the object
// is deleted first, as before), and if one fails the deletion is not sent
// and is retried; then it creates and updates, in dependency order
// (VRF tables, NAT44 plugin, interfaces (an unnumbered interface after
// the interface it borrows from, in the same pass), IP neighbors, routes,
// NAT44 features, pools and mappings, ACL lists), what is desired and not
// yet as desired. An item whose dependencies (its VRF table, a route's
// outgoing interfaces and table, a NAT44 object's plugin and interface,
// an ACL list's interface and every ACL it names) are not configured is
// parked
// (StatePending, with the missing keys) and applied in the same pass as
// they are. An object already applied keeps being reported configured
// while VPP holds what it depends on, even if their new values wait.
// Each pass is planned before anything is sent (which keys are removed,
// created, updated and parked, in which order); when a request fails, what
// the plan would have applied on top of it is parked on it instead.
// Failures are recorded per key (StateFailed, with the error and the
// attempt count); retriable ones (any VPP retval except INVALID_VALUE and
// NO_PATHS_IN_ROUTE) are retried with exponential backoff (see
// Config.RetryInitial). Retvals meaning "already so" are success:
// IF_ALREADY_EXISTS on af_packet create (the existing sw_if_index is
// adopted), NAT44 "already enabled"/"already disabled", and on deletes
// INVALID_SW_IF_INDEX, NO_SUCH_ENTRY, NO_SUCH_FIB,
// ADDRESS_NOT_FOUND_FOR_INTERFACE, SYSCALL_ERROR_1 (af_packet gone) and,
// for cnat's SNAT entry and tables, FEATURE_DISABLED (no entry).
// VPP itself treats repeated route adds, table adds and route deletes as
// success. The backends of a load-balanced NAT44 mapping change in place:
// one request per backend added or removed (two for a changed
// probability); VPP keeps at least two backends, so a change that would
// pass below two, or that keeps none of the old backends, re-creates the
// mapping (delete + add). NAT44 forwarding changes in place; a new session
// count re-enables the plugin, which wipes and re-applies all NAT44
// configuration. VPP keeps the name a table was created with, so a new VRF
// table label re-creates the table and what is in it.
//
// An ACL is created with acl_add_replace (index ~0: VPP assigns the index)
// and changed in place with acl_add_replace on its index (it keeps the
// index and stays applied); an interface's ACL lists are set with one
// acl_interface_set_acl_list (input ACLs first), for a creation and a
// change alike, and cleared (an empty list) when the key goes, unless
// the interface is deleted in the same pass: VPP drops an interface's
// lists with it, so nothing is sent for them. VPP refuses to delete an
// ACL that a list names (-142, -143): a list switched from an old ACL to
// a new one is set after the new ACL is created and before the old one is
// deleted (three requests, see above), and the interface is never without
// its ACLs in between.
//
// A cnat translation is created and changed with one
// cnat_translation_update (VPP finds it by VIP, protocol and port, keeps
// its id and replaces its paths and flags), with every endpoint given by
// address (sw_if_index ~0), and deleted by id; VPP keeps the lb type and
// the flow hash a translation was made with, so a new lb type or flow
// hash (or real_ip, no_client) re-creates it. A translation is never sent without paths (VPP 26.06
// dies; the model refuses them) and cnat_session_purge is never sent (it
// deletes every translation). The SNAT entry's addresses
// (cnat_set_snat_addresses, FIB index 0) are set before every change of
// its excluded prefixes and policy, in the same op (again when they do not
// change), and the entry before the interface tables, which depend on it:
// VPP 26.06 dies on an excluded prefix or a policy without an entry. VPP keeps an address until
// the entry is deleted, and the flags of the entry's first set (no_client:
// cnat_set_snat_addresses_v2 with NO_CLIENT), so a value that drops one or
// changes no_client re-creates the entry.
// A translation of a SNAT address shares the entry's cnat client, which
// VPP frees with the address's last translation (VPP 26.06 then dies when
// the entry is deleted): deleting such a translation sets the SNAT
// addresses again, and deleting the entry sets them again first. The
// cnat feature is not idempotent (every enable stacks cnat's nodes once
// more): the driver enables it once and remembers it; VPP drops it with
// its interface (nothing is sent then), but keeps a deleted interface in
// the SNAT tables (for the next interface of its index), so the tables
// are left before the interface is deleted.
//
// The cost of an update commit is proportional to the keys it changes and
// their dependents, not to the node's total state: the driver keeps
// reverse-dependency indexes (what is applied on top of a key; what waits
// for it), a queue of keys that need work, a retry queue ordered by time,
// and publishes the statuses of the keys a pass touched only. A resync
// (CommitResync, CommitReapply, every reconnect) reads VPP back and looks
// at every key, by nature.
//
// Until the first CommitResync has given the complete desired state, a
// pass removes only what a commit deleted (or replaced): what a readback
// finds in VPP and no commit mentioned is kept. A restarted agent's driver
// connects, typically, before the agent's start-up resync commit; it must
// not tear down what it is about to want again.
//
// # Ownership
//
// The driver deletes only what it owns:
//   - interfaces: the VPP interface tag is Config.TagPrefix + name
//     ("vsk:" by default); interfaces without it are foreign. An adopted
//     (EXISTING) interface is tagged Config.TagPrefix + "=" + name and
//     never deleted: the driver removes what it configured on it (its
//     addresses, unnumbered, VRF bindings), sets it admin down and removes
//     the tag; a missing one fails the key with [ErrNoSuchInterface]
//     (retried). Every interface but a tap gets its tag in a second
//     request: one that VPP made but the driver could not tag
//     (the tag request failed, or the caller gave up in between) is
//     deleted by the key's retry, but a readback in between (a resync, a
//     restart of the driver) does not see it as the driver's, and it
//     stays behind in VPP;
//   - static IP neighbors on owned interfaces are owned (learnt ones are
//     not looked at);
//   - VRF tables: the table name is TagPrefix + label;
//   - ACLs: their tag is TagPrefix + name (VPP assigns the index; the
//     driver finds it again by the tag); ACLs without it are foreign and
//     never changed or deleted (a foreign ACL in a list the driver owns
//     is replaced by the desired list). The ACL lists of owned interfaces
//     are owned;
//   - cnat translations and the SNAT entry have no tag: like NAT44 pools
//     they are owned only if the driver applied or wants their key; cnat
//     on owned interfaces is owned. VPP reports neither a translation's
//     is_real_ip and flags, nor the SNAT policy's excluded prefixes and
//     policy, nor cnat on interfaces at all: a readback takes them from
//     the driver's record, and for a key no pass of this driver has
//     looked at yet (a new driver on a populated VPP), from the desired
//     value, so a feature the old process had not enabled stays disabled,
//     and a lost reply to an enable makes the retry enable it again;
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
//     VPP reports an attached host route (a /32 or /128 via an interface,
//     no next hop) exactly like the host entries it makes itself for IP
//     neighbors and for resolving next hops; such an entry is the driver's
//     only if the driver knows its key, and a route via an interface to
//     its own host address is the same as that attached route.
//
// # Connection
//
// Run connects with core.Connect on a fresh adapter, checks that VPP knows
// exactly the messages the driver uses, reads the owned configuration back
// from VPP (interface, table, route, address, af_packet, tap, NAT44, ACL
// and cnat dumps) and
// reconciles (a routed VXLAN tunnel's payload family is read from its
// decap-next with get_next_index, which writes nothing). Until the first
// resync commit (the complete desired state) it removes nothing: a driver
// that (re)starts on a populated VPP and connects before the application's
// first resync leaves VPP as it is, and that resync then finds in place
// what is still desired. A VPP that lacks core messages (or has them with
// another
// CRC) fails every key with [ErrIncompatible], naming the messages, and
// Commit returns that error marked with [controller.NewPermanentError]: the
// controller reports it instead of healing in a loop, and the driver
// recovers by itself when it reconnects to a compatible VPP (after VPP
// restarts, e.g. upgraded). The VXLAN, memif, NAT44-ED, ACL and cnat plugin
// messages are checked separately: without them only those keys fail (and Commit
// reports the missing feature the same way). Every (re)connect retries
// what failed before. memif control sockets are registered once per
// filename and left registered when their last memif goes; the memifs of
// one socket file must all be masters or all slaves (VPP refuses the
// others with retval -68; the key fails and is retried). VPP reports
// neither a memif's secret nor its configured ring and buffer sizes (only
// the running ones): the driver takes them from its own record, so a
// change made to them in VPP behind the driver's back is not noticed.
//
// A failed send, a reply missing its deadline or a failed control_ping
// health probe drop the connection; Run reconnects and resyncs. From the
// moment the driver notices a lost connection until it has reconnected and
// read VPP back, no key is reported StateConfigured (a restarted VPP holds
// nothing): they are StatePending, and [Stats] says not connected. A dead
// VPP is noticed at the latest HealthInterval + RequestTimeout after it
// died.
//
// Requests go out on one stream per connection, pipelined: the calls of
// one stage of all items of one kind are sent in windows of Config.Window
// requests, and their replies read in order, every window of them within
// Config.RequestTimeout. Dumps are pipelined the same way (dump,
// control_ping) and read as they arrive. When the caller's context ends
// during a pass, no further request is sent but the replies to those
// already sent are read (under their own deadline), so the driver always
// knows what VPP did; the unfinished keys fail with the context's error and
// are retried (a half-created interface is re-created).
//
// # Status and metrics
//
// [Driver.Status] and [Driver.Statuses] report each desired key (invalid
// ones included): pending (on which keys), configured, or failed (with the
// error, attempts and the next retry). [Driver.Stats] is a snapshot for an
// operator's metrics: connection state, keys by state, invalid values,
// failing keys by kind, and counters of commits, passes, resyncs,
// connections, VPP requests and failed attempts.
//
// # Failing keys
//
// A key that VPP refuses again and again (say a pod interface whose host
// interface is missing: af_packet_create_v3 answers -71) keeps failing
// from its Config.FailingAfter-th failed attempt in a row (default 3), or
// at once when the failure is permanent. From then until it is configured,
// deleted or given a new value (a reconnect, which retries it from
// scratch, does not end it), it is:
//   - logged at Warn once when it begins ("key failing": key, kind,
//     attempts, error) and once when it ends ("key no longer failing":
//     key, kind, state: configured, pending, deleted or invalid), never
//     per retry; keys that fail because VPP lacks messages are not logged
//     one by one (the incompatibility is, once per connection);
//   - reported with [KeyStatus].FailingSince set, counted in
//     [Stats].Failing and [Stats].FailingByKind ("interface", "route",
//     "vrf", "neighbor", "nat44", "acl", "cnat"), and listed by [Driver.Failing] with its
//     last error;
//   - named by [Driver.Degraded], which returns nil while no key keeps
//     failing and otherwise an error wrapping [ErrDegraded] that names the
//     failing keys (the first ten, sorted) with their last errors and
//     attempts.
//
// Degraded is meant for a health endpoint: the agent is degraded, not
// dead (the driver keeps retrying, and restarting does not help), so it
// belongs where controller.Loop.Healthy's ErrDegraded goes, e.g. a
// /healthz that answers 200 "ok (degraded: …)", and it does not make the
// agent unready. Invalid values are not failing keys: Commit returns them
// (the loop reports them, see controller.Loop.RejectedKeys).
//
// # Concurrency
//
// Driver is safe for concurrent use. One mutex serializes Commit, retries
// and resyncs (it is held during VPP I/O); Status, Statuses and Stats read
// a separately locked snapshot and do not wait for a pass.
//
// # Lifecycle
//
// [New] does no I/O and starts no goroutine; a bad [Config] is an error
// naming every bad field. [Driver.Run] owns the connection, the health
// probe and the retry timer; it returns ctx.Err() (having disconnected)
// when its context ends, and is single-use (a second call returns an
// error wrapping [ErrAlreadyRunning]). Commit works without Run: values
// are recorded and applied once Run has connected.
//
// # Logging
//
// The driver logs to Config.Logger with component=vppdriver and typed
// attributes: Info when it connects, Warn once when VPP becomes
// unreachable (a failed first connect, a lost connection) and once when it
// is connected again (not per attempt), Warn once per connection for a VPP
// that lacks messages, Warn when a key begins and ceases to keep failing
// (see "Failing keys"), Debug for every failed attempt of a key.
package vppdriver
