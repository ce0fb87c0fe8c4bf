package bgp

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
)

// Objects is a snapshot of the cluster's v2 BGP configuration objects, as
// an [ObjectSource] returns it. Nil maps and slices are empty.
//
// An Objects value is read-only once handed out: safe for concurrent use as
// long as nobody modifies it.
type Objects struct {
	ClusterConfigs []*ClusterConfig
	// PeerConfigs, Overrides and AuthSecrets are by name.
	PeerConfigs    map[string]*PeerConfig
	Advertisements []*Advertisement
	Overrides      map[string]*NodeConfigOverride
	// AuthSecrets maps a Secret's name to its password.
	AuthSecrets map[string]string
	// Invalid are the objects that could not be converted, and why; they
	// are left out of the fields above.
	Invalid []InvalidObject
}

// InvalidObject is a configuration object left out because it failed its
// checks.
type InvalidObject struct {
	// Kind and Name identify the object (Kind is one of the Kind constants).
	Kind, Name string
	// Err says why, naming the bad fields.
	Err error
}

// ObjectSource is an optional interface of a [PolicySource]: a source that
// also follows the v2 configuration objects. The controller finds it by
// type assertion. Objects returns a snapshot (nil: no v2 object); it must
// be safe for concurrent use.
type ObjectSource interface {
	Objects() *Objects
}

// ConditionType is the kind of a [Condition].
type ConditionType string

// Condition types. Node-level conditions concern the node's configuration
// as a whole; peer-level ones (in [PeerStatus].Conditions) one peer.
const (
	// ConditionConflictingConfig: more than one configuration selects the
	// node (a v1 policy and a v2 cluster config, two cluster configs, two
	// policies); the node keeps what it applied before.
	ConditionConflictingConfig ConditionType = "ConflictingConfig"
	// ConditionInvalidObject: an object that could concern the node failed
	// its checks and is left out (the message names the fields).
	ConditionInvalidObject ConditionType = "InvalidObject"
	// ConditionReconcileError: the last attempt to apply the configuration
	// failed; the message is the error.
	ConditionReconcileError ConditionType = "ReconcileError"
	// ConditionMissingPeerConfig: the peer names a peer config that does
	// not exist (or is invalid); the peer is not configured.
	ConditionMissingPeerConfig ConditionType = "MissingPeerConfig"
	// ConditionMissingAuthSecret: the peer's config names an auth secret
	// that does not exist or has no password; the peer is not configured.
	ConditionMissingAuthSecret ConditionType = "MissingAuthSecret"
	// ConditionNotListening: the peer is passive but its instance has no
	// local port; the peer is not configured (it could never connect).
	ConditionNotListening ConditionType = "NotListening"
	// ConditionFamilyDisabled: an address family of the peer is not
	// offered, e.g. the node has no address of that family for next hops.
	ConditionFamilyDisabled ConditionType = "FamilyDisabled"
)

// Condition reports a problem with the node's BGP configuration or one of
// its peers.
type Condition struct {
	Type ConditionType
	// Object is the configuration object concerned, "<Kind>/<name>"; empty
	// if none.
	Object  string
	Message string
}

func (c Condition) String() string {
	if c.Object == "" {
		return fmt.Sprintf("%s: %s", c.Type, c.Message)
	}
	return fmt.Sprintf("%s %s: %s", c.Type, c.Object, c.Message)
}

func compareConditions(a, b Condition) int {
	if c := strings.Compare(string(a.Type), string(b.Type)); c != 0 {
		return c
	}
	if c := strings.Compare(a.Object, b.Object); c != 0 {
		return c
	}
	return strings.Compare(a.Message, b.Message)
}

// ObjectRef returns "<kind>/<name>".
func ObjectRef(kind, name string) string { return kind + "/" + name }

// ClusterConfigSelection returns the cluster config that selects the node
// (nil if none), with the semantics of [PolicySelection]: more than one is
// an error matching [ErrMultipleClusterConfigs]; an invalid selector is an
// error naming the config.
func ClusterConfigSelection(ctx context.Context, node *kubemodel.Node, configs []*ClusterConfig) (*ClusterConfig, error) {
	if node == nil {
		return nil, fmt.Errorf("bgp: cluster config selection: node is nil")
	}
	var selected *ClusterConfig
	for _, c := range configs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if c == nil {
			continue
		}
		match := true
		if c.NodeSelector != nil {
			var err error
			if match, err = c.NodeSelector.Matches(node.GetLabels()); err != nil {
				return nil, fmt.Errorf("bgp: cluster config %q: node selector: %w", c.Name, err)
			}
		}
		if !match {
			continue
		}
		if selected != nil {
			return nil, fmt.Errorf("cluster configs %q and %q: %w", selected.Name, c.Name, ErrMultipleClusterConfigs)
		}
		selected = c
	}
	return selected, nil
}

// Resolution is what [Resolve] makes of the v2 objects for a node.
type Resolution struct {
	// Spec is the node's desired state; nil when no cluster config selects
	// the node.
	Spec *NodeSpec
	// Excluded are the peers of the selected cluster config left out of
	// Spec, with their instance's ASN and the peer's address and ASN for
	// the status.
	Excluded []ExcludedPeer
	// Conditions are node-level conditions (invalid objects that concern
	// the node).
	Conditions []Condition
}

// ExcludedPeer is a peer [Resolve] left out of the spec.
type ExcludedPeer struct {
	Instance string
	LocalASN uint32
	Peer     ClusterPeer
	// Conditions say why (at least one).
	Conditions []Condition
}

// Resolve builds a node's desired state from the v2 objects:
//
//   - the cluster config that selects the node ([ClusterConfigSelection];
//     none: a nil Spec);
//   - for each of its instances: the local ASN and port, overridden by the
//     node's [NodeConfigOverride] (the one named after the node), which
//     also sets the router ID (default: the node's IPv4 address, see
//     [ControlPlaneState.RouterID]) and peers' local addresses;
//   - for each peer: its session from its [PeerConfig] (the defaults
//     without a reference) and the password of the config's auth secret;
//     per family, the advertisements whose labels the family's selector
//     matches (in name order, their entries in order) and the import
//     prefix list.
//
// A peer whose peer config is missing or invalid, whose auth secret is
// missing or empty, or that is passive without a local port, is left out
// with a condition (Excluded): the other peers are configured. Invalid
// objects that could concern the node become node-level conditions: every
// invalid cluster config (its selector could match), the invalid peer
// configs the node's peers name, the invalid advertisements (any could be
// selected), and the node's invalid override. A nil objs has no objects.
func Resolve(ctx context.Context, node *kubemodel.Node, objs *Objects) (*Resolution, error) {
	if objs == nil {
		objs = &Objects{}
	}
	res := &Resolution{}
	invalid := map[string]InvalidObject{}
	for _, o := range objs.Invalid {
		invalid[ObjectRef(o.Kind, o.Name)] = o
	}
	report := func(kind, name string) {
		if o, ok := invalid[ObjectRef(kind, name)]; ok {
			res.Conditions = append(res.Conditions, Condition{Type: ConditionInvalidObject, Object: ObjectRef(kind, name), Message: o.Err.Error()})
			delete(invalid, ObjectRef(kind, name))
		}
	}
	for _, o := range objs.Invalid {
		switch o.Kind {
		case KindClusterConfig, KindAdvertisement:
			report(o.Kind, o.Name)
		case KindNodeConfigOverride:
			if node != nil && o.Name == node.GetName() {
				report(o.Kind, o.Name)
			}
		}
	}
	defer func() { slices.SortFunc(res.Conditions, compareConditions) }()

	cc, err := ClusterConfigSelection(ctx, node, objs.ClusterConfigs)
	if err != nil || cc == nil {
		return res, err
	}
	override := objs.Overrides[node.GetName()]
	spec := &NodeSpec{Source: ObjectRef(KindClusterConfig, cc.Name)}
	adverts := slices.Clone(objs.Advertisements)
	slices.SortFunc(adverts, func(a, b *Advertisement) int { return strings.Compare(a.Name, b.Name) })
	for _, ci := range cc.Instances {
		in := Instance{Name: ci.Name, LocalASN: ci.LocalASN, LocalPort: ci.LocalPort}
		var oi *OverrideInstance
		if override != nil {
			if k := slices.IndexFunc(override.Instances, func(o OverrideInstance) bool { return o.Name == ci.Name }); k >= 0 {
				oi = &override.Instances[k]
			}
		}
		if oi != nil {
			if oi.LocalASN != 0 {
				in.LocalASN = oi.LocalASN
			}
			if oi.LocalPort != 0 {
				in.LocalPort = oi.LocalPort
			}
			in.RouterID = oi.RouterID
		}
		for _, cp := range ci.Peers {
			exclude := func(typ ConditionType, object, format string, args ...any) {
				res.Excluded = append(res.Excluded, ExcludedPeer{Instance: in.Name, LocalASN: in.LocalASN, Peer: cp,
					Conditions: []Condition{{Type: typ, Object: object, Message: fmt.Sprintf(format, args...)}}})
			}
			pc := &PeerConfig{}
			if cp.PeerConfigRef != "" {
				ref := ObjectRef(KindPeerConfig, cp.PeerConfigRef)
				var ok bool
				if pc, ok = objs.PeerConfigs[cp.PeerConfigRef]; !ok {
					if bad, isBad := invalid[ref]; isBad {
						exclude(ConditionMissingPeerConfig, ref, "peer config %s is invalid: %v", cp.PeerConfigRef, bad.Err)
					} else {
						exclude(ConditionMissingPeerConfig, ref, "peer config %s does not exist", cp.PeerConfigRef)
					}
					continue
				}
			}
			password := ""
			if pc.AuthSecretRef != "" {
				pw, ok := objs.AuthSecrets[pc.AuthSecretRef]
				if !ok || pw == "" {
					exclude(ConditionMissingAuthSecret, ObjectRef(KindAuthSecret, pc.AuthSecretRef),
						"auth secret %s of peer config %s does not exist or has no password", pc.AuthSecretRef, pc.Name)
					continue
				}
				password = pw
			}
			if pc.Passive && in.LocalPort == 0 {
				exclude(ConditionNotListening, ObjectRef(KindClusterConfig, cc.Name),
					"peer %s is passive but instance %s has no local port: it could never connect", cp.Name, in.Name)
				continue
			}
			p := Peer{Name: cp.Name, Neighbor: pc.neighbor(cp.PeerAddress, cp.PeerASN, password)}
			if oi != nil {
				if k := slices.IndexFunc(oi.Peers, func(o OverridePeer) bool { return o.Name == cp.Name }); k >= 0 {
					p.LocalAddress = oi.Peers[k].LocalAddress
				}
			}
			if p.LocalAddress.IsValid() && p.LocalAddress.Is4() != p.PeerAddress.Is4() {
				exclude(ConditionInvalidObject, ObjectRef(KindNodeConfigOverride, override.Name),
					"local address %s of peer %s is not of the family of its address %s", p.LocalAddress, cp.Name, p.PeerAddress)
				continue
			}
			families := pc.Families
			if len(families) == 0 {
				families = []PeerConfigFamily{{Family: IPv4Unicast}, {Family: IPv6Unicast}}
			}
			for _, f := range families {
				pf := PeerFamily{Family: f.Family, Import: slices.Clone(f.Import)}
				if f.Advertisements != nil {
					for _, a := range adverts {
						if ok, _ := f.Advertisements.Matches(a.Labels); ok {
							for _, ad := range a.Adverts {
								pf.Adverts = append(pf.Adverts, ad.Clone())
							}
						}
					}
				}
				p.PeerFamilies = append(p.PeerFamilies, pf)
			}
			in.Peers = append(in.Peers, p)
		}
		spec.Instances = append(spec.Instances, in)
	}
	// The invalid peer configs the node's peers name.
	for _, ci := range cc.Instances {
		for _, cp := range ci.Peers {
			if cp.PeerConfigRef != "" {
				report(KindPeerConfig, cp.PeerConfigRef)
			}
		}
	}
	res.Spec = spec
	return res, nil
}
