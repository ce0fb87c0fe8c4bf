// Package bgpmodel holds the protobuf models of the BGP configuration and
// status, and their key scheme, so that they can be stored in etcd next to
// the models of package kubemodel and reach package bgp through the event
// loop:
//
//   - v1 (proto vswitchkit.bgp.v1): the peering policy (PeeringPolicy),
//     under PolicyKeyPrefix (/vswitchkit/k8s/bgppeeringpolicy/<name>).
//     Package bgp converts it with bgp.PolicyFromModel.
//   - v2 (proto vswitchkit.bgp.v2): ClusterConfig, PeerConfig,
//     Advertisement, NodeConfigOverride and AuthSecret, under
//     /vswitchkit/k8s/<resource>/<name> with the resource names
//     bgpclusterconfig, bgppeerconfig, bgpadvertisement,
//     bgpnodeconfigoverride and bgpauthsecret ([ObjectKey],
//     [V2Resources]; [Resources] is v1 and v2 for a watcher). Package bgp
//     converts them with bgp.ClusterConfigFromModel and its siblings.
//   - status (proto vswitchkit.bgp.v2): NodeStatus, one per node under its
//     own key outside the Kubernetes-state range, [StatusKey]:
//     /vswitchkit/bgpstatus/<node> ([DefaultStatusPrefix]). The node's
//     agent writes it (package bgp/bgpstatus); the reflector's leader and
//     operators read it.
//
// The generated messages follow the usual protobuf rules: they are not safe
// for concurrent use while being modified; treat stored values as
// read-only.
package bgpmodel
