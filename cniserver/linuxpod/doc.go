// Package linuxpod implements [cniserver.Linux] with netlink
// (github.com/vishvananda/netlink and netns, and the containernetworking
// plugins' ns and netlinksafe helpers): veth pairs for af_packet pod
// interfaces, and the addresses, routes, permanent neighbor entries, MAC
// and MTU of a pod's interface inside its network namespace.
//
// It works on network namespaces by path (CNI_NETNS) through netlink
// handles opened in them, without switching the namespace of any thread.
// It needs CAP_NET_ADMIN (and CAP_SYS_ADMIN to enter namespaces): the agent
// runs as root on the node.
//
// # Concurrency
//
// [Linux] is safe for concurrent use: it keeps no state, and every call
// opens and closes its own netlink sockets.
//
// # Lifecycle
//
// [New] does nothing but return the value; there is nothing to run or
// close. On systems other than Linux every method returns an error
// wrapping errors.ErrUnsupported.
package linuxpod
