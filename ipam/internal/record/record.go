// Package record encodes the pod IP allocation records of the ipam stores
// (ipam/etcdstore, ipam/boltstore): the key of a pod's record is
// "<namespace>/<name>" (below the store's prefix or bucket), the value is
// its address in text form ("10.1.5.2", "fd00::2").
//
// Key and Parse are inverse: every key Key returns parses back to the same
// pod, and Parse rejects what Key cannot produce, so a record a store
// wrote can always be read back.
package record

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/ipam"
)

// Key returns the record key of pod: "<namespace>/<name>". The name must
// not be empty, and neither part may contain '/'.
func Key(pod kubemodel.PodID) (string, error) {
	switch {
	case pod.Name == "":
		return "", fmt.Errorf("pod %q: empty name", pod.String())
	case strings.Contains(pod.Namespace, "/"), strings.Contains(pod.Name, "/"):
		return "", fmt.Errorf("pod %q: '/' in the namespace or name", pod.String())
	}
	return pod.Namespace + "/" + pod.Name, nil
}

// AppendValue appends the record value of addr to b.
func AppendValue(b []byte, addr netip.Addr) []byte { return addr.AppendTo(b) }

// Parse decodes a record: key as built by Key, value an IP address
// without zone (an IPv4-mapped IPv6 address is unmapped).
func Parse(key string, value []byte) (ipam.Allocation, error) {
	ns, name, ok := strings.Cut(key, "/")
	if !ok || name == "" || strings.Contains(name, "/") {
		return ipam.Allocation{}, fmt.Errorf("record key %q: not <namespace>/<name>", key)
	}
	a, err := netip.ParseAddr(string(value))
	if err != nil {
		return ipam.Allocation{}, fmt.Errorf("record %q: %w", key, err)
	}
	if a.Zone() != "" {
		return ipam.Allocation{}, fmt.Errorf("record %q: %w", key, errZone)
	}
	return ipam.Allocation{Pod: kubemodel.PodID{Namespace: ns, Name: name}, Addr: a.Unmap()}, nil
}

var errZone = errors.New("address has a zone")
