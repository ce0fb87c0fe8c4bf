// Package record encodes the pod IP allocation records of the ipam stores
// (ipam/etcdstore, ipam/boltstore): the key of a pod's record is
// "<namespace>/<name>" (below the store's prefix or bucket), the value is
// its address in text form, followed, if the sandbox holding the address
// is known (ipam.Allocation.ContainerID), by one space and the sandbox's
// container ID:
//
//	10.1.5.2                 holder unknown
//	10.1.5.2 3f2a9c0e51d4    held by sandbox 3f2a9c0e51d4
//	fd00::2 3f2a9c0e51d4
//
// The container ID is the rest of the value after the first space, taken
// verbatim (it may contain anything, spaces included); an address never
// contains a space. Records written before holders were recorded hold the
// address only, and read back with an unknown holder: the encoding is
// backward compatible. It is not forward compatible: a version that
// predates holders skips a record that names one as undecodable.
//
// Key and Parse are inverse, and so are AppendValue and Parse: every key
// Key returns parses back to the same pod, every value AppendValue returns
// parses back to the same address and container ID, and Parse rejects what
// Key and AppendValue cannot produce (but for an IPv4-mapped IPv6 address,
// which is read as the IPv4 address), so a record a store wrote can always
// be read back.
package record

import (
	"bytes"
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

// AppendValue appends the record value of addr, held by the sandbox
// containerID ("" if unknown), to b.
func AppendValue(b []byte, addr netip.Addr, containerID string) []byte {
	b = addr.AppendTo(b)
	if containerID != "" {
		b = append(b, ' ')
		b = append(b, containerID...)
	}
	return b
}

// Parse decodes a record: key as built by Key, value as built by
// AppendValue (an address without zone, an IPv4-mapped IPv6 address is
// unmapped; then optionally a space and a non-empty container ID).
func Parse(key string, value []byte) (ipam.Allocation, error) {
	ns, name, ok := strings.Cut(key, "/")
	if !ok || name == "" || strings.Contains(name, "/") {
		return ipam.Allocation{}, fmt.Errorf("record key %q: not <namespace>/<name>", key)
	}
	addrText, container, hasHolder := bytes.Cut(value, []byte{' '})
	if hasHolder && len(container) == 0 {
		return ipam.Allocation{}, fmt.Errorf("record %q: %w", key, errEmptyHolder)
	}
	a, err := netip.ParseAddr(string(addrText))
	if err != nil {
		return ipam.Allocation{}, fmt.Errorf("record %q: %w", key, err)
	}
	if a.Zone() != "" {
		return ipam.Allocation{}, fmt.Errorf("record %q: %w", key, errZone)
	}
	return ipam.Allocation{
		Pod:         kubemodel.PodID{Namespace: ns, Name: name},
		Addr:        a.Unmap(),
		ContainerID: string(container),
	}, nil
}

var (
	errZone        = errors.New("address has a zone")
	errEmptyHolder = errors.New("empty container ID after the address")
)
