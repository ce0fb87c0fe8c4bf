// Package watcher turns the Kubernetes state and this node's external
// configuration, stored in etcd, into events for a controller.EventLoop,
// and keeps a local bbolt mirror of what it delivered so that the agent can
// start while etcd is unreachable.
//
// # Events
//
// [Watcher.Run] reads one snapshot of both key spaces at a single etcd
// revision — in pages of [Config.SnapshotPageSize] keys, a failed page
// repeated alone, so that thousands of agents starting at once each read
// the state once however many requests time out — and pushes it as a
// controller.DBResync (Local=false): KubeState
// holds an entry (possibly empty) for every registered resource, keyed by
// the key relative to [Config.KubeStatePrefix] (for example
// "k8s/pod/default/web", as built by kubemodel.PodKey); ExternalConfig is
// keyed by the key relative to [Config.ExternalConfigPrefix]. It then
// watches both prefixes from the snapshot revision + 1, so no change between
// the snapshot and the watch is missed and none is delivered twice, and
// pushes:
//
//   - a controller.KubeStateChange per changed Kubernetes key (Resource, Key
//     relative to the prefix, PrevValue nil for an addition, NewValue nil
//     for a deletion);
//   - a controller.ExternalConfigChange (non-blocking, Source
//     [Config.ExternalConfigSource]) per etcd revision that changed external
//     keys; a key mapped to nil was deleted.
//
// A put that does not change the stored bytes produces no event. Events of
// one prefix arrive in etcd revision order; the two prefixes are watched
// independently.
//
// A fresh DBResync is delivered, and the watch restarted after it, when the
// watch falls behind the compacted revision (never an error loop), when the
// connection to etcd comes back after it was lost (etcd restarted, network
// partition healed), when the watch is lost for any other reason, and when
// the event loop refused a change for longer than [Config.QueueFullTimeout].
//
// # Values
//
// Kubernetes values are the binary protobuf encoding of the resource's
// message (kubemodel.Pod for "pod", and so on). External-configuration
// values are the binary encoding of a google.protobuf.Any; its type URL is
// resolved with [Config.ExternalConfigTypes] (every linked-in generated
// message by default), and the event carries the unpacked message. A key
// that breaks its resource's key scheme, and a value that does not decode,
// are counted in [Stats] (BadKeys, BadValues, and per resource in
// SkippedByResource and SkippedExternal), logged at Warn with the key
// and the reason, and skipped: a key whose value turns into garbage is
// delivered as deleted, since the state it held is gone. A key of a resource
// that is not registered (one this agent does not use) is only counted
// (UnknownKeys) and skipped. The
// watcher keeps running. Values are never logged, and the etcd password
// neither ([EtcdConfig.LogValue] redacts it).
//
// # Resources
//
// The registry starts with kubemodel.Resources() (pod, pod peer, service,
// endpoints, node, namespace, network policy) and [Config.Resources] adds
// user resources (a name, a key prefix
// relative to the Kubernetes-state prefix, a message constructor and a
// namespaced flag). A key belongs to the resource with the longest matching
// key prefix.
//
// # Key layouts and the node's pods
//
// The Kubernetes state is stored in one of the key layouts of package
// kubemodel, which the value of kubemodel.LayoutKey names (the watcher
// reads it with every snapshot, at the snapshot's revision):
//
//   - kubemodel.LayoutNodePods (what the reflector writes): pods are
//     stored per node (kubemodel.NodePodKey). With [Config.NodeName] the
//     watcher reads and watches the cluster-wide state (the root without
//     the per-node subtree: services, endpoints, nodes, namespaces,
//     network policies, the pods' peer records, user resources) and its
//     node's subtree, one etcd watch per range: etcd sends it its node's
//     pods alone, and every other pod as its compact peer record at most.
//     Without NodeName it reads every node's pods. Pods are delivered
//     under their pod keys (kubemodel.PodKey) either way.
//   - kubemodel.LayoutFlat (no layout key: reflectors before layouts):
//     the watcher reads and watches the whole root, and with NodeName
//     keeps the pods of that node (as [NodePods] does).
//
// When the layout key changes (the reflector moved the state: it writes
// the new keys, then the layout key, then deletes the old keys, which the
// watcher ignores) the watcher delivers a fresh DBResync in the new
// layout. It refuses, with an error wrapping [ErrLayout] that ends Run
// ([LayoutError]), a layout it does not know (a reflector of a newer
// version: upgrade the agent), and a pod written under its flat key while
// the layout is per-node (a reflector of an older version writing beside
// the current one); an agent never runs on state it would misread.
//
// [Config.Keep] narrows what is delivered further: a value it rejects is
// counted in [Stats] (Unkept) and dropped, neither decoded, delivered, kept
// nor mirrored. A key whose value starts or stops being kept is delivered
// as added or deleted.
//
// # Mirror
//
// With [Config.MirrorPath] set, everything delivered is written to a bbolt
// file: a DBResync rewrites the whole mirror in a single transaction, and
// changes are applied in batched transactions after they were pushed. The
// writes run on a goroutine of their own, in order: delivering a change
// never waits for the disk. A write starts [Config.MirrorWriteDelay] after
// the first change queued and takes everything queued by then, so a burst
// of changes costs one transaction (one fsync) and no fsync competes with
// the processing of a lone change; the mirror lags the delivered state by
// about that delay, which is what a crash can lose from it (the mirror is
// a cache for starting without etcd; etcd stays the truth). A crash, even
// in the middle of a rewrite, leaves the previous consistent content. A
// failed write is logged, counted and retried with backoff
// ([Config.RetryMinBackoff] to [Config.RetryMaxBackoff]) together with the
// changes queued meanwhile. Run writes what is queued before it returns.
//
// When no snapshot can be read from etcd within [Config.MirrorFallbackDelay]
// after Run starts, the mirrored state is pushed as a DBResync with
// Local=true (if the mirror holds a snapshot taken under the same prefixes).
// The watcher keeps trying etcd, and once it answers, a DBResync with
// Local=false replaces the local state.
//
// # Backpressure
//
// PushEvent never blocks. When it fails (normally with
// controller.ErrQueueFull), the event is retried with exponential backoff
// (1 ms doubling up to 100 ms, github.com/cenkalti/backoff/v5). A DBResync
// is retried until it is accepted or ctx ends. A change is retried for up to
// [Config.QueueFullTimeout] (the watcher gives up rather than wait past it);
// then the watcher stops delivering changes one by one and delivers a fresh
// DBResync instead, so a change is never dropped silently.
// controller.ErrStopped ends Run.
//
// # Concurrency
//
// [Watcher] is safe for concurrent use: [Watcher.Run] is called once, and
// [Watcher.Stats] may be called from any goroutine at any time. Events are
// pushed from the goroutine that called Run; messages in delivered events
// are shared with the watcher and must not be modified.
//
// # Lifecycle
//
// [New] and [NewWithClient] validate the configuration and do no I/O.
// [Watcher.Run] opens the mirror, creates the etcd client (for New; the
// client given to NewWithClient stays the caller's), and runs until ctx is
// done or the event loop stops. It returns only after every goroutine it
// started has exited, and closes the mirror and the client it created.
package watcher
