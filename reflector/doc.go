// Package reflector writes the Kubernetes state that vswitchkit agents read
// into etcd: it lists and watches the Kubernetes API with client-go
// reflectors into caches (an informer per resource),
// converts each object into its protobuf model (package kubemodel, or a
// user-supplied model), and stores it under the key scheme that the etcd
// watcher (watcher) reads. It is the cluster-wide component that
// Contiv called KSR; run one or more replicas per cluster.
//
//	kube := kubernetes.NewForConfigOrDie(restConfig)
//	r, err := reflector.New(etcdClient, reflector.KubernetesResources(kube), reflector.Config{})
//	...
//	err = r.Run(ctx) // until ctx is done
//
// # Keys and values
//
// The full key of an object is [Config.Prefix] (default [DefaultPrefix],
// the watcher's default KubeStatePrefix) followed by its relative key, e.g.
// "/vswitchkit/" + kubemodel.ServiceKey("default", "web") =
// "/vswitchkit/k8s/service/default/web". Pods are stored per node
// (kubemodel.LayoutNodePods): "/vswitchkit/" +
// kubemodel.NodePodKey("node-1", "default", "web") =
// "/vswitchkit/k8s/nodepod/node-1/default/web", so that a node's agent
// reads and watches its own node's pods alone; a pod not scheduled yet is
// not stored; every pod with an address also has its compact peer record
// (kubemodel.PodPeerKey), which every agent reads. Values are the deterministic binary
// protobuf encoding of the model. Only the fields of the model are
// reflected: [ConvertPod], [ConvertService], [ConvertNode],
// [ConvertNamespace] and [ConvertEndpointSlices] document which Kubernetes
// fields they read. The endpoints of a service are the merge of its
// EndpointSlices (discovery.k8s.io/v1).
//
// A key is written only when its encoded value changed, so status churn
// that no agent reads (conditions, heartbeats, container statuses) causes
// no etcd write. Writes go in transactions of at most [Config.BatchSize]
// operations (etcd's --max-txn-ops, 128 by default).
//
// # Key layout
//
// A reflector with a per-node resource ([Resource.NodeKeyPrefix]: the pods
// of [KubernetesResources]) writes kubemodel.CurrentLayout into
// kubemodel.LayoutKey; the watcher reads the layout there and refuses one
// it does not know. When the leader finds the state of a reflector of the
// flat layout (pods under kubemodel.PodKey, no layout key) it moves it in
// an order that no agent of this version sees as pods going away: first
// the per-node keys, then the layout key (agents resync in the per-node
// layout), then it deletes the flat keys (which those agents ignore).
// Agents of a version before layouts read only the flat layout and would
// see every pod deleted: upgrade the agents before the reflector. A
// reflector of the flat layout must not run beside this one: an agent
// that sees a pod written under its flat key while the layout is
// per-node stops with an error (watcher.ErrLayout).
//
// # Resources
//
// [KubernetesResources] returns the built-in resources: nodes, pods (per
// node), pod peer records, services, endpoints, namespaces and network
// policies. Applications add their own
// [Resource] values — a list-watch source (typed or dynamic client), a
// Convert function into a proto.Message and a Key function — as package
// bgp/bgpreflector does for the BGP peering-policy custom resource.
//
// # Reconcile
//
// The leader reconciles etcd with the informer caches when it becomes
// leader, after every failed etcd request, and after an informer re-lists
// (its watch expired, or the API server restarted): it reads the keys under each resource's prefix,
// puts what is missing or different and deletes the keys of objects that
// no longer exist. It never deletes the whole prefix, nor the key of an
// object that exists, so a watching agent only ever sees real changes.
// Keys under the prefix that belong to no resource are left alone.
//
// # Bad objects
//
// An object that cannot be converted (a pod whose IP does not parse, a
// service port out of range, a name that breaks the key scheme) is logged
// at Warn with the reason, counted in [ResourceStats.BadObjects], and not
// reflected; if an earlier version of it was, its key is deleted, since
// the stored value no longer describes the object. The other objects are
// reflected.
//
// # Replicas and leadership
//
// Replicas elect one leader through etcd (concurrency.Election under
// [Config.ElectionPrefix], held by a lease of [Config.SessionTTL]). All
// replicas keep warm informer caches, but only the leader writes: every
// write transaction is fenced by a comparison on the creation revision of
// the leader's election key, so a replica that lost the leadership (its
// lease expired or was revoked) cannot write any more, even before it
// noticed, and two replicas never write at once. A leader that stops
// revokes its lease, so another replica takes over at once; a leader that
// dies is replaced after at most SessionTTL.
//
// # etcd outages
//
// A failed etcd request is retried after an exponential backoff
// ([Config.RetryMinBackoff] to [Config.RetryMaxBackoff]) as a full
// reconcile, so changes made during the outage are written once etcd
// answers, and nothing that changed meanwhile is left stale. Changes of
// one object that pile up meanwhile are coalesced: only its latest state
// is written. Failed requests are counted ([Stats] WriteErrors and
// CampaignErrors); the outage is logged at Warn once when it starts and at
// Info once when it ends, not per retry.
//
// # Kubernetes API outages
//
// An informer whose request fails (the API server is down or restarting,
// or answers 403 for a moment after it started, before its RBAC state is
// loaded) retries it after a backoff from [Config.RetryMinBackoff] to
// [Config.APIRetryMaxBackoff] (1 s), and re-lists as soon as its watch
// cannot be resumed (a restarted API server answers 410 Gone to watches
// from before its start); the re-list is followed by a reconcile. The
// informers are client-go reflectors over caches of the package's own,
// because client-go's shared informers fix that backoff at 0.8 s doubling
// to 30 s with as much jitter again, which after a few API server
// restarts within two minutes holds changes back for 25 to 50 s. Failed
// requests are counted per resource ([ResourceStats] APIErrors and
// LastAPIError) and logged at Warn once when they start and at Info once
// when they end.
//
// # Metrics
//
// [Reflector.Stats] returns the leadership state and counters: objects
// reflected, puts, deletes, bad objects and informer events per resource;
// transactions, write errors, failed campaigns, reconciles and the
// duration of the latest one. The package registers no metrics itself; bridge Stats to
// Prometheus in the application.
//
// # Concurrency
//
// [Reflector] is safe for concurrent use: Run is called once; Stats may be
// called from any goroutine at any time. Informer notifications only mark
// objects as changed; a single writer goroutine (the one that called Run)
// converts objects and writes to etcd.
//
// # Lifecycle
//
// [New] validates the configuration and the resources and does no I/O.
// [Reflector.Run] starts the informers, waits for their caches to sync,
// campaigns, and writes while it leads, until ctx is done; it then gives
// up the leadership and returns after every goroutine it started has
// exited. The etcd client and the Kubernetes clients stay the caller's.
//
// # What it does not do
//
// It does not write Kubernetes objects back to the API server, and it
// reflects no Kubernetes type other than the resources it is given.
package reflector
