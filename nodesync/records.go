package nodesync

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/nodesync/nodesyncmodel"
)

// Key layout relative to Config.Prefix.
const (
	nodeKeyPrefix = "node/" // node/<name> -> nodesyncmodel.VswitchNode
	idKeyPrefix   = "id/"   // id/<id> -> nodesyncmodel.NodeIDClaim
)

func nodeKey(name string) string { return nodeKeyPrefix + name }
func idKey(id uint32) string     { return idKeyPrefix + strconv.FormatUint(uint64(id), 10) }

// vswitchRecord is the parsed form of a nodesyncmodel.VswitchNode.
type vswitchRecord struct {
	ID     uint32
	Name   string
	IPs    IPsWithNetworks // canonical
	ModRev int64
}

// parseRecord decodes the record stored under key (relative to the prefix).
func parseRecord(key string, value []byte, modRev int64) (vswitchRecord, error) {
	name, ok := strings.CutPrefix(key, nodeKeyPrefix)
	if !ok || name == "" {
		return vswitchRecord{}, &RecordError{Key: key, Err: errors.New("not a node record key")}
	}
	var m nodesyncmodel.VswitchNode
	if err := (KV{Value: value}).Unmarshal(&m); err != nil {
		return vswitchRecord{}, &RecordError{Key: key, Err: err}
	}
	if m.GetName() != name {
		return vswitchRecord{}, &RecordError{Key: key, Err: fmt.Errorf("name %q does not match the key", m.GetName())}
	}
	ips, err := ipsFromModel(m.GetIpAddresses())
	if err != nil {
		return vswitchRecord{}, &RecordError{Key: key, Err: err}
	}
	return vswitchRecord{ID: m.GetId(), Name: name, IPs: ips.Canonical(), ModRev: modRev}, nil
}

func recordToModel(r vswitchRecord) *nodesyncmodel.VswitchNode {
	m := &nodesyncmodel.VswitchNode{Id: r.ID, Name: r.Name}
	for _, a := range r.IPs {
		m.IpAddresses = append(m.IpAddresses, &nodesyncmodel.IPWithNetwork{Address: a.Address.String(), Network: a.Network.String()})
	}
	return m
}

func ipsFromModel(in []*nodesyncmodel.IPWithNetwork) (IPsWithNetworks, error) {
	var out IPsWithNetworks
	for _, m := range in {
		addr, err := netip.ParseAddr(m.GetAddress())
		if err != nil {
			return nil, fmt.Errorf("address: %w", err)
		}
		network, err := netip.ParsePrefix(m.GetNetwork())
		if err != nil {
			return nil, fmt.Errorf("network: %w", err)
		}
		a := IPWithNetwork{Address: addr, Network: network}
		if err := a.Validate(); err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

// parseClaim decodes the ID claim stored under key (relative to the prefix).
func parseClaim(key string, value []byte) (uint32, string, error) {
	s, ok := strings.CutPrefix(key, idKeyPrefix)
	if !ok {
		return 0, "", &RecordError{Key: key, Err: errors.New("not an ID claim key")}
	}
	id, err := strconv.ParseUint(s, 10, 32)
	if err != nil || id == 0 || strconv.FormatUint(id, 10) != s {
		return 0, "", &RecordError{Key: key, Err: fmt.Errorf("%q is not a canonical positive 32-bit ID", s)}
	}
	var m nodesyncmodel.NodeIDClaim
	if err := (KV{Value: value}).Unmarshal(&m); err != nil {
		return uint32(id), "", &RecordError{Key: key, Err: err}
	}
	if m.GetId() != uint32(id) || m.GetName() == "" {
		return uint32(id), "", &RecordError{Key: key, Err: fmt.Errorf("claim of ID %d by %q does not match the key", m.GetId(), m.GetName())}
	}
	return uint32(id), m.GetName(), nil
}

// kubeInfo is what NodeSync takes from a Kubernetes node object.
type kubeInfo struct {
	Mgmt     []net.IP
	PodCIDRs []netip.Prefix
}

// parseKubeNode extracts the management addresses (InternalIP, then
// ExternalIP, without duplicates) and pod CIDRs of n. Unparsable entries are
// skipped and reported in the returned error; the info is usable anyway.
func parseKubeNode(n *kubemodel.Node) (kubeInfo, error) {
	var info kubeInfo
	var errs []error
	seen := make(map[netip.Addr]bool)
	for _, typ := range []kubemodel.NodeAddress_Type{kubemodel.NodeAddress_INTERNAL_IP, kubemodel.NodeAddress_EXTERNAL_IP} {
		for _, a := range n.GetAddresses() {
			if a.GetType() != typ {
				continue
			}
			addr, err := netip.ParseAddr(a.GetAddress())
			if err != nil || addr.Zone() != "" {
				errs = append(errs, fmt.Errorf("node %s: bad %s address %q", n.GetName(), typ, a.GetAddress()))
				continue
			}
			addr = addr.Unmap()
			if seen[addr] {
				continue
			}
			seen[addr] = true
			info.Mgmt = append(info.Mgmt, net.IP(addr.AsSlice()))
		}
	}
	for _, c := range n.GetPodCidrs() {
		p, err := netip.ParsePrefix(c)
		if err != nil {
			errs = append(errs, fmt.Errorf("node %s: bad pod CIDR %q", n.GetName(), c))
			continue
		}
		info.PodCIDRs = append(info.PodCIDRs, p.Masked())
	}
	return info, errors.Join(errs...)
}
