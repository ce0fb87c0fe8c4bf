package bgp

import (
	"net/netip"
	"strconv"
	"strings"
)

// AnnotationPrefix starts the node annotations that configure virtual
// routers: "bgp.vswitchkit.io/virtual-router.<local ASN>" with a value of
// comma-separated attributes, for example
//
//	bgp.vswitchkit.io/virtual-router.65001: router-id=10.0.0.2,local-port=1790
const AnnotationPrefix = "bgp.vswitchkit.io/virtual-router."

// RouterAnnotation is the parsed annotation of one virtual router.
// The zero value means "no annotation": router ID from the node's IPv4
// address and no listening socket.
type RouterAnnotation struct {
	// ASN is the local ASN named in the annotation key.
	ASN uint32
	// RouterID is the BGP identifier (an IPv4 address); invalid if absent.
	RouterID netip.Addr
	// LocalPort is the TCP port the speaker listens on; 0 if absent, which
	// means the speaker does not listen (it only connects out).
	LocalPort uint16
}

// AnnotationMap maps a local ASN to its parsed annotation. A nil map is
// empty and valid.
type AnnotationMap map[uint32]RouterAnnotation

// ParseAnnotations parses the virtual-router annotations among a node's
// annotations (other annotations are ignored). Parsing is strict: the ASN
// must be a decimal 1..4294967295 without sign or leading zeros, attributes
// are "router-id=<IPv4>" and "local-port=<1..65535>", each at most once,
// without spaces; anything else is an error. The error joins one
// *[AnnotationError] per bad annotation; the returned map holds the good
// ones.
func ParseAnnotations(annotations map[string]string) (AnnotationMap, error) {
	out := make(AnnotationMap)
	var errs []error
	for key, value := range annotations {
		asnStr, ok := strings.CutPrefix(key, AnnotationPrefix)
		if !ok {
			continue
		}
		ra, err := parseRouterAnnotation(key, asnStr, value)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out[ra.ASN] = ra
	}
	return out, joinSorted(errs)
}

func parseRouterAnnotation(key, asnStr, value string) (RouterAnnotation, error) {
	bad := func(reason string) (RouterAnnotation, error) {
		return RouterAnnotation{}, &AnnotationError{Key: key, Value: value, Reason: reason}
	}
	asn, err := parseDecimal(asnStr, 32)
	if err != nil || asn == 0 {
		return bad("the key must end in a local ASN 1..4294967295")
	}
	ra := RouterAnnotation{ASN: uint32(asn)}
	if value == "" {
		return ra, nil
	}
	seen := make(map[string]bool)
	for attr := range strings.SplitSeq(value, ",") {
		name, val, ok := strings.Cut(attr, "=")
		if !ok || name == "" || val == "" {
			return bad("attributes must be name=value separated by commas: " + strconv.Quote(attr))
		}
		if seen[name] {
			return bad("duplicate attribute " + strconv.Quote(name))
		}
		seen[name] = true
		switch name {
		case "router-id":
			a, err := netip.ParseAddr(val)
			if err != nil || !a.Is4() || a.IsUnspecified() {
				return bad("router-id must be a non-zero IPv4 address: " + strconv.Quote(val))
			}
			ra.RouterID = a
		case "local-port":
			p, err := parseDecimal(val, 16)
			if err != nil || p == 0 {
				return bad("local-port must be 1..65535: " + strconv.Quote(val))
			}
			ra.LocalPort = uint16(p)
		default:
			return bad("unknown attribute " + strconv.Quote(name) + ", want router-id or local-port")
		}
	}
	return ra, nil
}

// parseDecimal accepts only plain decimal digits without sign, spaces or
// leading zeros.
func parseDecimal(s string, bits int) (uint64, error) {
	if s == "" || (len(s) > 1 && s[0] == '0') {
		return 0, strconv.ErrSyntax
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, strconv.ErrSyntax
		}
	}
	return strconv.ParseUint(s, 10, bits)
}
