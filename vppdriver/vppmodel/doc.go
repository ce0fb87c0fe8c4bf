// Package vppmodel holds the protobuf models of the VPP configuration that the
// vppdriver reconciler owns, their keys and their validation.
//
// Keys:
//
//	vpp/interface/<name>               Interface
//	vpp/vrf/<ipv4|ipv6>/<id>           VrfTable
//	vpp/route/<vrf>/<dst network>      Route (e.g. vpp/route/0/10.2.0.0/16)
//	vpp/neighbor/<interface>/<ip>      IPNeighbor (e.g. vpp/neighbor/vxlan-2/192.168.30.2)
//	vpp/nat44/global                   Nat44Global (NAT44-ED plugin enabled)
//	vpp/nat44/interface/<name>         Nat44Interface
//	vpp/nat44/pool/<first>-<last>[/twice-nat]        Nat44AddressPool
//	vpp/nat44/pool/if:<name>[/twice-nat]             Nat44AddressPool (of an interface)
//	vpp/nat44/static/<proto>/<ip>:<port>             Nat44StaticMapping
//	vpp/nat44/identity/<proto>/<ip|if:name>:<port>   Nat44IdentityMapping
//	vpp/nat44/lb/<proto>/<ip>:<port>                 Nat44LbStaticMapping
//	vpp/acl/<name>                     ACL
//	vpp/acl-interface/<interface>      ACLInterface
//	vpp/cnat/translation/<tcp|udp>/<vip>:<port>      CnatTranslation (e.g. vpp/cnat/translation/udp/[fd00::10]:53)
//	vpp/cnat/snat                      CnatSnat
//	vpp/cnat/interface/<interface>     CnatInterface
//
// # Concurrency
//
// The functions of this package are pure and safe for concurrent use. The
// generated messages are not safe for concurrent mutation; treat values
// handed to the driver as immutable.
//
// # Lifecycle
//
// Nothing to start or stop.
package vppmodel
