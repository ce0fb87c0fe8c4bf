// Package bgpmodel holds the protobuf model of a BGP peering policy
// (PeeringPolicy) and its key scheme, so that policies can be stored in the
// Kubernetes-state key space next to the models of package kubemodel and
// reach package bgp through the event loop. Package bgp converts it with
// bgp.PolicyFromModel.
//
// The generated messages follow the usual protobuf rules: they are not safe
// for concurrent use while being modified; treat stored values as
// read-only.
package bgpmodel
