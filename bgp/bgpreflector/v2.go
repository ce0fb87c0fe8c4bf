package bgpreflector

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/vswitchkit/vswitchkit/bgp/bgpmodel"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/reflector"
)

// Identity of the v2 custom resources (crd-v2.yaml), after Cilium's BGP v2
// resources: group bgp.vswitchkit.io, version v2.
const (
	GroupV2   = "bgp.vswitchkit.io"
	VersionV2 = "v2"

	KindClusterConfig      = "BGPClusterConfig"
	KindPeerConfig         = "BGPPeerConfig"
	KindAdvertisement      = "BGPAdvertisement"
	KindNodeConfigOverride = "BGPNodeConfigOverride"
	// KindNodeStatus is the per-node status object that [StatusWriter]
	// writes (only its status; named after the node).
	KindNodeStatus = "BGPNodeStatus"

	PluralClusterConfig      = "bgpclusterconfigs"
	PluralPeerConfig         = "bgppeerconfigs"
	PluralAdvertisement      = "bgpadvertisements"
	PluralNodeConfigOverride = "bgpnodeconfigoverrides"
	PluralNodeStatus         = "bgpnodestatuses"

	// DefaultSecretNamespace is the namespace whose Secrets hold the BGP
	// TCP-MD5 passwords (key "password"), by default.
	DefaultSecretNamespace = "vswitchkit-bgp"
)

// GroupVersionResourceV2 returns the resource of a v2 kind by its plural.
func GroupVersionResourceV2(plural string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: GroupV2, Version: VersionV2, Resource: plural}
}

// ListKindsV2 maps every v2 resource to its list kind, for client-go's
// fake dynamic client (NewSimpleDynamicClientWithCustomListKinds).
func ListKindsV2() map[schema.GroupVersionResource]string {
	return map[schema.GroupVersionResource]string{
		GroupVersionResourceV2(PluralClusterConfig):      KindClusterConfig + "List",
		GroupVersionResourceV2(PluralPeerConfig):         KindPeerConfig + "List",
		GroupVersionResourceV2(PluralAdvertisement):      KindAdvertisement + "List",
		GroupVersionResourceV2(PluralNodeConfigOverride): KindNodeConfigOverride + "List",
		GroupVersionResourceV2(PluralNodeStatus):         KindNodeStatus + "List",
	}
}

// V2Config configures [V2Resources]. The zero value is valid.
type V2Config struct {
	// SecretNamespace is the namespace whose Secrets are reflected as
	// auth secrets (only their "password" key). Default:
	// [DefaultSecretNamespace]. Unlike Cilium's default (kube-system), a
	// namespace of its own: every Secret in it is copied into etcd, so put
	// nothing else there.
	SecretNamespace string
}

// fieldNamesV2 is fieldNames for the v2 messages. ClusterConfig.name and
// the other names come from metadata.name, Advertisement.labels from
// metadata.labels.
var fieldNamesV2 = map[protoreflect.FullName]map[string]protoreflect.Name{
	"vswitchkit.bgp.v2.ClusterConfig": {
		"nodeSelector": "node_selector",
		"bgpInstances": "bgp_instances",
	},
	"vswitchkit.bgp.v2.ClusterInstance": {
		"name": "name", "localASN": "local_asn", "localPort": "local_port", "peers": "peers",
	},
	"vswitchkit.bgp.v2.ClusterPeer": {
		"name": "name", "peerAddress": "peer_address", "peerASN": "peer_asn", "peerConfigRef": "peer_config_ref",
	},
	"vswitchkit.bgp.v2.PeerConfigReference": {"name": "name", "group": "group", "kind": "kind"},
	"vswitchkit.bgp.v2.PeerConfig": {
		"transport": "transport", "timers": "timers", "authSecretRef": "auth_secret_ref", "ebgpMultihop": "ebgp_multihop",
		"gracefulRestart": "graceful_restart", "families": "families",
	},
	"vswitchkit.bgp.v2.PeerTransport": {"peerPort": "peer_port", "passive": "passive"},
	"vswitchkit.bgp.v2.PeerTimers": {
		"connectRetryTimeSeconds": "connect_retry_time_seconds", "holdTimeSeconds": "hold_time_seconds",
		"keepAliveTimeSeconds": "keep_alive_time_seconds",
	},
	"vswitchkit.bgp.v2.PeerFamily":    {"afi": "afi", "safi": "safi", "advertisements": "advertisements", "importPrefixes": "import_prefixes"},
	"vswitchkit.bgp.v2.PrefixMatch":   {"prefix": "prefix", "ge": "ge", "le": "le"},
	"vswitchkit.bgp.v2.Advertisement": {"advertisements": "advertisements"},
	"vswitchkit.bgp.v2.AdvertisementEntry": {
		"advertisementType": "advertisement_type", "service": "service", "selector": "selector", "attributes": "attributes",
		"podCIDR": "pod_cidr",
	},
	"vswitchkit.bgp.v2.ServiceOptions": {
		"addresses": "addresses", "aggregationLengthIPv4": "aggregation_length_ipv4", "aggregationLengthIPv6": "aggregation_length_ipv6",
		"loadBalancerClasses": "load_balancer_classes",
	},
	"vswitchkit.bgp.v2.PodCIDROptions": {"aggregationLengthIPv4": "aggregation_length_ipv4", "aggregationLengthIPv6": "aggregation_length_ipv6"},
	"vswitchkit.bgp.v2.Attributes":     {"communities": "communities", "localPreference": "local_preference"},
	"vswitchkit.bgp.v2.Communities":    {"standard": "standard", "wellKnown": "well_known", "large": "large"},
	"vswitchkit.bgp.v2.NodeConfigOverride": {
		"bgpInstances": "bgp_instances",
	},
	"vswitchkit.bgp.v2.OverrideInstance": {
		"name": "name", "routerID": "router_id", "localPort": "local_port", "localASN": "local_asn", "peers": "peers",
	},
	"vswitchkit.bgp.v2.OverridePeer": {"name": "name", "localAddress": "local_address"},
}

// convertV2 fills m (whose first field is its name) from the spec of obj:
// only structural problems (unknown fields, wrong JSON types, numbers out
// of 0..2^32-1, a name that breaks the key scheme) are errors, as
// *reflector.ObjectError values naming the field. Everything else is left
// to the agents (package bgp's checks), which report a bad object in
// their status and logs instead of the reflector dropping it silently.
func convertV2(resource string, obj *unstructured.Unstructured, m proto.Message) error {
	c := converter{resource: resource, object: obj.GetName()}
	if err := kubemodel.ValidateName(obj.GetName()); err != nil {
		c.fail("metadata.name", obj.GetName(), err.Error())
	}
	r := m.ProtoReflect()
	r.Set(r.Descriptor().Fields().ByName("name"), protoreflect.ValueOfString(obj.GetName()))
	switch spec := obj.Object["spec"].(type) {
	case nil:
	case map[string]any:
		c.fill(r, spec, "spec")
	default:
		c.fail("spec", spec, "not an object")
	}
	return errors.Join(c.errs...)
}

// ConvertClusterConfig returns the model of a BGPClusterConfig (see
// convertV2 in this file for what is an error here).
func ConvertClusterConfig(obj *unstructured.Unstructured) (*bgpmodel.ClusterConfig, error) {
	m := &bgpmodel.ClusterConfig{}
	if err := convertV2(bgpmodel.ClusterConfigResourceName, obj, m); err != nil {
		return nil, err
	}
	return m, nil
}

// ConvertPeerConfig returns the model of a BGPPeerConfig.
func ConvertPeerConfig(obj *unstructured.Unstructured) (*bgpmodel.PeerConfig, error) {
	m := &bgpmodel.PeerConfig{}
	if err := convertV2(bgpmodel.PeerConfigResourceName, obj, m); err != nil {
		return nil, err
	}
	return m, nil
}

// ConvertAdvertisement returns the model of a BGPAdvertisement, with the
// object's labels (peer families select advertisements by them).
func ConvertAdvertisement(obj *unstructured.Unstructured) (*bgpmodel.Advertisement, error) {
	m := &bgpmodel.Advertisement{}
	if err := convertV2(bgpmodel.AdvertisementResourceName, obj, m); err != nil {
		return nil, err
	}
	if l := obj.GetLabels(); len(l) > 0 {
		m.Labels = l
	}
	return m, nil
}

// ConvertNodeConfigOverride returns the model of a BGPNodeConfigOverride.
func ConvertNodeConfigOverride(obj *unstructured.Unstructured) (*bgpmodel.NodeConfigOverride, error) {
	m := &bgpmodel.NodeConfigOverride{}
	if err := convertV2(bgpmodel.NodeConfigOverrideResourceName, obj, m); err != nil {
		return nil, err
	}
	return m, nil
}

// ConvertAuthSecret returns the auth secret of a Secret: its name and the
// value of its key "password" (empty if absent: agents then report the
// secret as missing). Nothing else of the Secret is kept.
func ConvertAuthSecret(s *corev1.Secret) (*bgpmodel.AuthSecret, error) {
	if err := kubemodel.ValidateName(s.Name); err != nil {
		return nil, &reflector.ObjectError{Resource: bgpmodel.AuthSecretResourceName, Object: s.Name, Field: "metadata.name", Value: s.Name, Reason: err.Error()}
	}
	m := &bgpmodel.AuthSecret{Name: s.Name, Password: string(s.Data["password"])}
	if m.Password == "" && s.StringData["password"] != "" {
		m.Password = s.StringData["password"]
	}
	return m, nil
}

// V2Resources returns the reflector resources of the v2 objects: cluster
// configs, peer configs, advertisements and node overrides, listed and
// watched through dyn (cluster-scoped, crd-v2.yaml), and the auth secrets
// (the Secrets of cfg.SecretNamespace, read through kube; none if kube is
// nil). They are stored under bgpmodel.ObjectKey of their resource names
// (bgpmodel.V2Resources). V2Resources does no I/O.
func V2Resources(dyn dynamic.Interface, kube kubernetes.Interface, cfg V2Config) []reflector.Resource {
	if cfg.SecretNamespace == "" {
		cfg.SecretNamespace = DefaultSecretNamespace
	}
	crd := func(resource, plural string, conv func(*unstructured.Unstructured) (proto.Message, error)) reflector.Resource {
		ri := dyn.Resource(GroupVersionResourceV2(plural))
		return reflector.Resource{
			Name:      resource,
			KeyPrefix: kubemodel.KeyRoot + resource + "/",
			ListWatch: cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
				ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
					return ri.List(ctx, o)
				},
				WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
					return ri.Watch(ctx, o)
				},
			}, dyn),
			Object: &unstructured.Unstructured{},
			Convert: func(obj any) (proto.Message, error) {
				u, ok := obj.(*unstructured.Unstructured)
				if !ok {
					return nil, fmt.Errorf("bgpreflector: unexpected object type %T", obj)
				}
				return conv(u)
			},
			Key: func(_, name string) string { return bgpmodel.ObjectKey(resource, name) },
		}
	}
	out := []reflector.Resource{
		crd(bgpmodel.ClusterConfigResourceName, PluralClusterConfig, func(u *unstructured.Unstructured) (proto.Message, error) {
			return ConvertClusterConfig(u)
		}),
		crd(bgpmodel.PeerConfigResourceName, PluralPeerConfig, func(u *unstructured.Unstructured) (proto.Message, error) {
			return ConvertPeerConfig(u)
		}),
		crd(bgpmodel.AdvertisementResourceName, PluralAdvertisement, func(u *unstructured.Unstructured) (proto.Message, error) {
			return ConvertAdvertisement(u)
		}),
		crd(bgpmodel.NodeConfigOverrideResourceName, PluralNodeConfigOverride, func(u *unstructured.Unstructured) (proto.Message, error) {
			return ConvertNodeConfigOverride(u)
		}),
	}
	if kube == nil {
		return out
	}
	ns := cfg.SecretNamespace
	return append(out, reflector.Resource{
		Name:      bgpmodel.AuthSecretResourceName,
		KeyPrefix: bgpmodel.AuthSecretKeyPrefix,
		ListWatch: cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return kube.CoreV1().Secrets(ns).List(ctx, o)
			},
			WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				return kube.CoreV1().Secrets(ns).Watch(ctx, o)
			},
		}, kube),
		Object: &corev1.Secret{},
		Convert: func(obj any) (proto.Message, error) {
			s, ok := obj.(*corev1.Secret)
			if !ok {
				return nil, fmt.Errorf("bgpreflector: unexpected object type %T", obj)
			}
			return ConvertAuthSecret(s)
		},
		Key: func(_, name string) string { return bgpmodel.ObjectKey(bgpmodel.AuthSecretResourceName, name) },
	})
}
