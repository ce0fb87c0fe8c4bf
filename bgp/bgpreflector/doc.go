// Package bgpreflector reflects the BGP configuration of a cluster into
// etcd, so that package bgp receives it through the etcd watcher and the
// event loop: the v1 peering policies (custom resource BGPPeeringPolicy of
// group vswitchkit.io, version v1) as bgpmodel.PeeringPolicy values under
// bgpmodel.PolicyKey ([Resource]), and the v2 objects (group
// bgp.vswitchkit.io, version v2: BGPClusterConfig, BGPPeerConfig,
// BGPAdvertisement, BGPNodeConfigOverride, and the auth secrets) under
// bgpmodel.ObjectKey ([V2Resources]). Its [StatusWriter] copies the
// per-node BGP status the agents publish back into BGPNodeStatus objects. It joins reflector, which knows nothing of BGP, to the BGP
// model: [Resource] is a reflector.Resource read with
// client-go's dynamic client.
//
//	resources := append(reflector.KubernetesResources(kube), bgpreflector.Resource(dyn))
//	r, err := reflector.New(etcdClient, resources, reflector.Config{})
//
// The watcher must know the resources too:
// watcher.Config{Resources: bgpmodel.Resources()}.
//
// # The v2 custom resources
//
// crd-v2.yaml defines them; their shapes follow Cilium's BGP v2 resources
// (package bgp has the semantics and the differences):
//
//	apiVersion: bgp.vswitchkit.io/v2
//	kind: BGPClusterConfig
//	metadata: {name: rack1}
//	spec:
//	  nodeSelector: {matchLabels: {rack: "1"}}
//	  bgpInstances:
//	  - name: main
//	    localASN: 64512
//	    peers:
//	    - {name: tor, peerAddress: 192.168.0.254, peerASN: 64500, peerConfigRef: {name: tor}}
//	---
//	apiVersion: bgp.vswitchkit.io/v2
//	kind: BGPPeerConfig
//	metadata: {name: tor}
//	spec:
//	  timers: {holdTimeSeconds: 9, keepAliveTimeSeconds: 3}
//	  authSecretRef: tor-md5
//	  gracefulRestart: {enabled: true}
//	  families:
//	  - afi: ipv4
//	    safi: unicast
//	    advertisements: {matchLabels: {advertise: tor}}
//	    importPrefixes: [{prefix: 0.0.0.0/0}]
//	---
//	apiVersion: bgp.vswitchkit.io/v2
//	kind: BGPAdvertisement
//	metadata: {name: pods-and-lbs, labels: {advertise: tor}}
//	spec:
//	  advertisements:
//	  - advertisementType: PodCIDR
//	    podCIDR: {aggregationLengthIPv4: 16}
//	    attributes: {communities: {standard: ["64512:100"], wellKnown: [no-export]}, localPreference: 200}
//	  - advertisementType: Service
//	    service: {addresses: [LoadBalancerIP], aggregationLengthIPv4: 24}
//	    selector: {matchExpressions: [{key: bgp, operator: Exists}]}
//
// The auth secrets are the Secrets of one namespace (V2Config:
// vswitchkit-bgp by default, not kube-system as Cilium's: every Secret of
// that namespace is reflected, so it must hold nothing else); only their
// "password" key is kept.
//
// v2 objects are converted structurally here ([ConvertClusterConfig] and
// the like: an unknown field, a value of the wrong JSON type, a number out
// of range, a name that breaks the key scheme make the reflector skip and
// report the object); what package bgp checks (selectors, ASNs,
// addresses, community strings, prefix lists, timers) is left to the
// agents, which report a bad object per object in their status
// (condition InvalidObject) and logs while the rest keeps working.
//
// # Status
//
// Every agent publishes its node's BGP status under its own etcd key
// (package bgp/bgpstatus). A [StatusWriter], run beside the reflector,
// copies them, while its replica leads, into the status of BGPNodeStatus
// objects named after the nodes, at a bounded rate (per node and
// overall); it can be switched off.
//
// # The custom resource
//
// crd.yaml in this directory is the CustomResourceDefinition (cluster-scoped,
// plural bgppeeringpolicies). Its spec mirrors bgpmodel.PeeringPolicy field
// by field in the usual Kubernetes spelling:
//
//	apiVersion: vswitchkit.io/v1
//	kind: BGPPeeringPolicy
//	metadata:
//	  name: rack1
//	spec:
//	  nodeSelector: {matchLabels: {rack: "1"}}
//	  virtualRouters:
//	  - localASN: 64512
//	    exportPodCIDR: true
//	    serviceSelector: {matchExpressions: [{key: bgp, operator: Exists}]}
//	    neighbors:
//	    - peerAddress: 192.168.0.254
//	      peerASN: 64500
//	      holdTimeSeconds: 90
//	      gracefulRestart: {enabled: true, restartTimeSeconds: 120}
//
// [Convert] documents the mapping. An object that does not convert (a field
// of the wrong type, an unknown field, a number out of range, an address
// that does not parse — see bgp.PolicyFromModel) is reported and skipped
// by the reflector.
//
// # Concurrency
//
// All functions are safe for concurrent use.
package bgpreflector
