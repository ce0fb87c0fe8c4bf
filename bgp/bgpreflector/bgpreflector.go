package bgpreflector

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"

	"github.com/vswitchkit/vswitchkit/bgp"
	"github.com/vswitchkit/vswitchkit/bgp/bgpmodel"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/reflector"
)

// Identity of the custom resource.
const (
	Group    = "vswitchkit.io"
	Version  = "v1"
	Kind     = "BGPPeeringPolicy"
	Plural   = "bgppeeringpolicies"
	ListKind = Kind + "List"
)

// GroupVersionResource returns the resource of the BGPPeeringPolicy custom
// resource, vswitchkit.io/v1 bgppeeringpolicies.
func GroupVersionResource() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: Group, Version: Version, Resource: Plural}
}

// Resource returns the reflector resource of the BGP peering policies,
// listed and watched through dyn (cluster-scoped), converted with
// [Convert] and stored under bgpmodel.PolicyKey(name). Its name is
// bgpmodel.PolicyResourceName. Resource does no I/O.
func Resource(dyn dynamic.Interface) reflector.Resource {
	ri := dyn.Resource(GroupVersionResource())
	return reflector.Resource{
		Name:      bgpmodel.PolicyResourceName,
		KeyPrefix: bgpmodel.PolicyKeyPrefix,
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
			return Convert(u)
		},
		Key: func(_, name string) string { return bgpmodel.PolicyKey(name) },
	}
}

// fieldNames maps, per model message, each field of the custom resource
// (its JSON name) to the field of the model it fills. Every field of every
// bgpmodel message appears here once (checked by a test), except
// PeeringPolicy.name, which comes from metadata.name.
var fieldNames = map[protoreflect.FullName]map[string]protoreflect.Name{
	"vswitchkit.bgp.v1.PeeringPolicy": {
		"nodeSelector":   "node_selector",
		"virtualRouters": "virtual_routers",
	},
	"vswitchkit.bgp.v1.LabelSelector": {
		"matchLabels":      "match_labels",
		"matchExpressions": "match_expressions",
	},
	"vswitchkit.bgp.v1.LabelSelectorRequirement": {
		"key":      "key",
		"operator": "operator",
		"values":   "values",
	},
	"vswitchkit.bgp.v1.VirtualRouter": {
		"localASN":              "local_asn",
		"exportPodCIDR":         "export_pod_cidr",
		"serviceSelector":       "service_selector",
		"serviceAdvertisements": "service_advertisements",
		"loadBalancerClasses":   "load_balancer_classes",
		"neighbors":             "neighbors",
	},
	"vswitchkit.bgp.v1.Neighbor": {
		"peerAddress":             "peer_address",
		"peerPort":                "peer_port",
		"peerASN":                 "peer_asn",
		"localAddress":            "local_address",
		"passive":                 "passive",
		"eBGPMultihopTTL":         "ebgp_multihop_ttl",
		"connectRetryTimeSeconds": "connect_retry_time_seconds",
		"holdTimeSeconds":         "hold_time_seconds",
		"keepaliveTimeSeconds":    "keepalive_time_seconds",
		"gracefulRestart":         "graceful_restart",
		"password":                "password",
		"families":                "families",
	},
	"vswitchkit.bgp.v1.GracefulRestart": {
		"enabled":            "enabled",
		"restartTimeSeconds": "restart_time_seconds",
	},
}

// Convert returns the model of a BGPPeeringPolicy object: metadata.name
// becomes name, and every field of spec fills the model field of the same
// meaning (nodeSelector → node_selector, virtualRouters[].localASN →
// local_asn, neighbors[].eBGPMultihopTTL → ebgp_multihop_ttl, and so on;
// the table is in this file). Every problem is reported, joined, as a
// *reflector.ObjectError naming the field: a field the model does not
// have, a value of the wrong JSON type, a number outside 0..2^32-1, a name
// that is not a Kubernetes object name, and whatever bgp.PolicyFromModel
// rejects (addresses that do not parse, ports and TTLs out of range).
// obj is only read.
func Convert(obj *unstructured.Unstructured) (*bgpmodel.PeeringPolicy, error) {
	c := converter{object: obj.GetName()}
	m := &bgpmodel.PeeringPolicy{Name: obj.GetName()}
	if err := kubemodel.ValidateName(obj.GetName()); err != nil {
		c.fail("metadata.name", obj.GetName(), err.Error())
	}
	switch spec := obj.Object["spec"].(type) {
	case nil:
	case map[string]any:
		c.fill(m.ProtoReflect(), spec, "spec")
	default:
		c.fail("spec", spec, "not an object")
	}
	if len(c.errs) == 0 {
		if _, err := bgp.PolicyFromModel(m); err != nil {
			c.fail("spec", nil, err.Error())
		}
	}
	if len(c.errs) > 0 {
		return nil, errors.Join(c.errs...)
	}
	return m, nil
}

type converter struct {
	resource string // "" is the peering policy's
	object   string
	errs     []error
}

func (c *converter) fail(field string, value any, reason string) {
	res := c.resource
	if res == "" {
		res = bgpmodel.PolicyResourceName
	}
	c.errs = append(c.errs, &reflector.ObjectError{Resource: res, Object: c.object, Field: field, Value: value, Reason: reason})
}

// fill sets the fields of m from the JSON object obj, following fieldNames
// (and fieldNamesV2).
func (c *converter) fill(m protoreflect.Message, obj map[string]any, path string) {
	names := fieldNames[m.Descriptor().FullName()]
	if names == nil {
		names = fieldNamesV2[m.Descriptor().FullName()]
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	slices.Sort(keys) // deterministic error order
	for _, k := range keys {
		v := obj[k]
		p := path + "." + k
		name, ok := names[k]
		if !ok {
			c.fail(p, nil, "unknown field")
			continue
		}
		if v == nil {
			continue
		}
		fd := m.Descriptor().Fields().ByName(name)
		switch {
		case fd.IsMap():
			mv, ok := v.(map[string]any)
			if !ok {
				c.fail(p, v, "not an object")
				continue
			}
			mm := m.Mutable(fd).Map()
			for mk, mvv := range mv {
				s, ok := mvv.(string)
				if !ok {
					c.fail(p+"."+mk, mvv, "not a string")
					continue
				}
				mm.Set(protoreflect.ValueOfString(mk).MapKey(), protoreflect.ValueOfString(s))
			}
		case fd.IsList():
			lv, ok := v.([]any)
			if !ok {
				c.fail(p, v, "not a list")
				continue
			}
			l := m.Mutable(fd).List()
			for i, e := range lv {
				ep := fmt.Sprintf("%s[%d]", p, i)
				if fd.Kind() == protoreflect.MessageKind {
					em, ok := e.(map[string]any)
					if !ok {
						c.fail(ep, e, "not an object")
						continue
					}
					el := l.NewElement()
					c.fill(el.Message(), em, ep)
					l.Append(el)
				} else if sv, ok := c.scalar(fd, e, ep); ok {
					l.Append(sv)
				}
			}
		case fd.Kind() == protoreflect.MessageKind:
			mv, ok := v.(map[string]any)
			if !ok {
				c.fail(p, v, "not an object")
				continue
			}
			c.fill(m.Mutable(fd).Message(), mv, p)
		default:
			if sv, ok := c.scalar(fd, v, p); ok {
				m.Set(fd, sv)
			}
		}
	}
}

// scalar converts a JSON scalar for a string, bool or uint32 field.
func (c *converter) scalar(fd protoreflect.FieldDescriptor, v any, path string) (protoreflect.Value, bool) {
	switch fd.Kind() {
	case protoreflect.StringKind:
		if s, ok := v.(string); ok {
			return protoreflect.ValueOfString(s), true
		}
		c.fail(path, v, "not a string")
	case protoreflect.BoolKind:
		if b, ok := v.(bool); ok {
			return protoreflect.ValueOfBool(b), true
		}
		c.fail(path, v, "not a boolean")
	case protoreflect.Uint32Kind:
		var n int64
		switch x := v.(type) {
		case int64:
			n = x
		case float64: // JSON numbers decoded without the integer hint
			if x != math.Trunc(x) {
				c.fail(path, v, "not an integer")
				return protoreflect.Value{}, false
			}
			n = int64(x)
		default:
			c.fail(path, v, "not a number")
			return protoreflect.Value{}, false
		}
		if n < 0 || n > math.MaxUint32 {
			c.fail(path, v, "must be 0..4294967295")
			return protoreflect.Value{}, false
		}
		return protoreflect.ValueOfUint32(uint32(n)), true
	default:
		c.fail(path, v, "unsupported field kind "+fd.Kind().String())
	}
	return protoreflect.Value{}, false
}
