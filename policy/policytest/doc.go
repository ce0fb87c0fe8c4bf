// Package policytest is the reference for Kubernetes NetworkPolicy
// (networking.k8s.io/v1) semantics that the policy processor and its
// renderers are tested against: an evaluator written only from the API
// reference and the Kubernetes documentation, the upstream e2e "netpol"
// model (namespaces x, y, z; pods a, b, c; TCP and UDP on ports 80 and 81),
// reachability matrices, and truth-table cases.
//
// It is deliberately naive: every question is answered by looping over
// every namespace, pod and policy, with no index and no cache, so that each
// function can be read against the specification line by line. It does not
// import, and must not be influenced by, the policy package.
//
// # Evaluator
//
// A [Cluster] holds nodes, namespaces, pods and policies (the kubemodel
// types). [Cluster.Allowed] tells whether a new connection from one
// [Endpoint] to another, with a protocol and destination port, is allowed:
// the egress of the source AND the ingress of the destination must allow it
// ([Cluster.EgressAllowed], [Cluster.IngressAllowed]). For each direction:
//
//   - A pod is isolated in a direction when at least one valid policy of its
//     namespace selects it (the policy's podSelector; a missing one selects
//     every pod) and affects that direction. A policy affects the
//     directions of its policyTypes; without policyTypes it affects Ingress
//     always and Egress when it has at least one egress rule. A pod that is
//     not isolated in a direction is allowed everything in that direction.
//   - An isolated pod is allowed a connection when at least one rule of at
//     least one policy that selects it (and affects the direction) matches:
//     policies and rules add up; nothing ever denies what another rule
//     allows.
//   - A rule matches when a peer matches (no peers: every peer, inside or
//     outside the cluster) and a port matches (no ports: every port of
//     every protocol).
//   - A peer with a podSelector and/or namespaceSelector matches pods only:
//     the pods selected by podSelector (missing: all pods) in the
//     namespaces selected by namespaceSelector (missing: the policy's own
//     namespace; empty: every namespace). A peer with an ipBlock matches an
//     address inside its CIDR and outside every except CIDR.
//   - A port matches a connection of its protocol (TCP when not given) to
//     its port number, to a port in port..endPort, to any port (no port
//     given), or to the port of a named container port. A named port is
//     resolved against the destination pod of the connection: for ingress
//     the pod the policy selects, for egress the peer pod connected to. It
//     matches when the destination pod declares a container port of that
//     name, with the connection's protocol and port number; it never
//     matches a destination that is not a pod.
//   - Label selectors: every matchLabels pair and every matchExpressions
//     requirement must hold; an empty selector matches everything. In:
//     the key is present with one of the values. NotIn: the key is absent
//     or its value is none of the values. Exists: the key is present.
//     DoesNotExist: the key is absent.
//
// # Choices where the specification leaves room
//
//   - ipBlock and pods. The documentation says ipBlock should name
//     cluster-external addresses and leaves its effect on pod traffic to
//     implementations. Here an ipBlock matches pod addresses too: a pod
//     whose address (the one used by the connection) is in the block is a
//     peer, whatever its labels.
//   - The local node. The API reference allows traffic to a pod from the
//     pod's own node (kubelet probes, host processes, host-network pods);
//     an ingress check of a connection whose source is the destination
//     pod's node is always allowed. Egress is not exempted.
//   - Host-network pods are not pods for NetworkPolicy: policies do not
//     select them (as targets or through pod/namespace selectors), their
//     named ports match nothing, and their traffic is the traffic of their
//     node (the documented "cannot distinguish" behaviour). An ipBlock
//     matches their (node) address like any address.
//   - Loopback. A pod connecting to its own address is evaluated like any
//     other connection (upstream e2e leaves loopback undefined and ignores
//     it).
//   - Named ports and protocols. The connection's protocol must equal both
//     the policy port's protocol and the named container port's protocol.
//   - Families. An ipBlock of one family never matches an address of the
//     other; selectors match a pod whichever of its addresses it uses.
//   - Non-canonical CIDRs (host bits set, "10.0.0.1/8") are accepted and
//     mean their network, as the API server accepts them.
//   - Services. The evaluator knows nothing of services: a connection to
//     a service address is evaluated as the backend pod receives it, after
//     translation, with the source address the pod sees.
//   - Invalid policies. The API server rejects them; the policy processor
//     reports them one by one and ignores them. The evaluator ignores every
//     policy that fails [Validate]: it neither isolates nor allows.
//
// # Connections, not packets
//
// NetworkPolicy is about connections. [Cluster.Allowed] answers for a NEW
// connection from the source to the destination; every reply packet of an
// allowed connection is allowed, in both directions, whatever the policies
// of the reverse direction say. A renderer that evaluates packets must
// therefore be stateful (permit the reverse flow of an established
// connection), and a test that compares packet verdicts with this package
// must compare only the packets that open a connection.
//
// # The model
//
// [Model] builds the upstream e2e model: namespaces x, y, z labelled
// ns=<name> and kubernetes.io/metadata.name=<name>; pods a, b, c in each,
// labelled pod=<name>, each with one container per served port
// ("cont-80-tcp" …) declaring the named ports "serve-80-tcp",
// "serve-80-udp", "serve-81-tcp" and "serve-81-udp"; pods spread over two
// nodes, with deterministic addresses ([ModelPodAddr]), IPv4 only or dual
// stack.
//
// # Matrices and cases
//
// A [Matrix] is the reachability of every pod from every pod for a set of
// [Probe]s (protocol, port, family). [Cluster.Matrix] computes it with the
// evaluator, [NewMatrix] with any other oracle (a renderer's ACLs, real
// packets), and [Matrix.String] prints it as tables in the style of the
// upstream truth tables ("." allowed, "X" denied), so a failing comparison
// shows the difference of two tables; [Diff] lists the differing cells.
//
// [Cases] returns the truth-table cases: each has policies and optional
// [Step]s (policy put or delete, pod or namespace label changes, pod port
// changes, pod deletion); [Case.Expect] computes the expected matrix before
// the first step and after each step.
//
// # Concurrency
//
// A Cluster is not safe for concurrent mutation; concurrent reads (the
// evaluator, Matrix) are safe. Cluster methods that change an object
// replace it with a changed copy rather than mutating it, so objects handed
// out earlier stay as they were.
package policytest
