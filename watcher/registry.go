package watcher

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/anypb"
)

// registry maps keys to resources and decodes values. It is immutable after
// newRegistry and safe for concurrent use.
type registry struct {
	kubePrefix string
	// kubeWatch is the part of the Kubernetes-state key space that holds
	// registered resources: kubePrefix followed by the longest common root
	// of their key prefixes ("k8s/" for the built-in ones). Only it is read
	// and watched, so other components' keys next to it (nodesync records,
	// IPAM allocations under the same top-level prefix) are never seen.
	kubeWatch string
	extPrefix string               // empty: no external config
	resources []kubemodel.Resource // sorted by descending key prefix length
	names     []string             // resource names, sorted
	types     protoregistry.MessageTypeResolver
	// layoutKey is the full key of kubemodel.LayoutKey.
	layoutKey string
	// node is Config.NodeName: the node whose per-node values are read.
	node string
	// perNode are the resources with a NodeKeyPrefix (pods).
	perNode []*kubemodel.Resource
}

func newRegistry(cfg Config) (*registry, error) {
	all := append(kubemodel.Resources(), cfg.Resources...)
	var errs []error
	byName := make(map[string]bool, len(all))
	byPrefix := make(map[string]string, len(all))
	for _, r := range all {
		if err := r.Validate(); err != nil {
			errs = append(errs, err)
			continue
		}
		if byName[r.Name] {
			errs = append(errs, fmt.Errorf("resource name %q registered twice", r.Name))
		}
		if other, ok := byPrefix[r.KeyPrefix]; ok {
			errs = append(errs, fmt.Errorf("resources %q and %q share the key prefix %q", other, r.Name, r.KeyPrefix))
		}
		byName[r.Name] = true
		byPrefix[r.KeyPrefix] = r.Name
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	sort.SliceStable(all, func(i, j int) bool { return len(all[i].KeyPrefix) > len(all[j].KeyPrefix) })
	names := make([]string, 0, len(all))
	for _, r := range all {
		names = append(names, r.Name)
	}
	sort.Strings(names)
	reg := &registry{
		kubePrefix: cfg.KubeStatePrefix,
		kubeWatch:  cfg.KubeStatePrefix + commonRoot(all),
		extPrefix:  cfg.ExternalConfigPrefix,
		resources:  all,
		names:      names,
		types:      cfg.ExternalConfigTypes,
		layoutKey:  cfg.KubeStatePrefix + kubemodel.LayoutKey,
		node:       cfg.NodeName,
	}
	for i := range reg.resources {
		if reg.resources[i].NodeKeyPrefix != "" {
			reg.perNode = append(reg.perNode, &reg.resources[i])
		}
	}
	return reg, nil
}

// commonRoot returns the longest common prefix of the resources' key
// prefixes (and node key prefixes, and the layout key) that ends in "/"
// (empty if they share none).
func commonRoot(rs []kubemodel.Resource) string {
	if len(rs) == 0 {
		return ""
	}
	prefixes := []string{kubemodel.LayoutKey}
	for _, r := range rs {
		prefixes = append(prefixes, r.KeyPrefix)
		if r.NodeKeyPrefix != "" {
			prefixes = append(prefixes, r.NodeKeyPrefix)
		}
	}
	root := prefixes[0]
	for _, p := range prefixes[1:] {
		n := 0
		for n < len(root) && n < len(p) && root[n] == p[n] {
			n++
		}
		root = root[:n]
	}
	return root[:strings.LastIndexByte(root, '/')+1]
}

// keyRange is the range [start, end) of etcd keys.
type keyRange struct{ start, end string }

// kubeRanges returns the ranges of the Kubernetes state read and watched
// in layout: the whole watched range in kubemodel.LayoutFlat; in
// kubemodel.LayoutNodePods the watched range without the per-node
// subtrees (the cluster-wide state), and of each per-node subtree the
// part of Config.NodeName (all of it without a node name). The ranges are
// disjoint and sorted.
func (r *registry) kubeRanges(layout int) []keyRange {
	end := clientv3.GetPrefixRangeEnd(r.kubeWatch)
	if layout == kubemodel.LayoutFlat || len(r.perNode) == 0 {
		return []keyRange{{r.kubeWatch, end}}
	}
	var holes, own []keyRange
	for _, res := range r.perNode {
		sub := r.kubePrefix + res.NodeKeyPrefix
		holes = append(holes, keyRange{sub, clientv3.GetPrefixRangeEnd(sub)})
		if r.node != "" {
			sub += r.node + "/"
		}
		own = append(own, keyRange{sub, clientv3.GetPrefixRangeEnd(sub)})
	}
	sort.Slice(holes, func(i, j int) bool { return holes[i].start < holes[j].start })
	var out []keyRange
	from := r.kubeWatch
	for _, h := range holes {
		if h.start > from {
			out = append(out, keyRange{from, h.start})
		}
		from = max(from, h.end)
	}
	if from < end {
		out = append(out, keyRange{from, end})
	}
	out = append(out, own...)
	sort.Slice(out, func(i, j int) bool { return out[i].start < out[j].start })
	return out
}

// snapshotRanges returns the ranges a snapshot reads in layout: the
// Kubernetes ranges and, if set, the external-configuration prefix.
func (r *registry) snapshotRanges(layout int) []keyRange {
	out := r.kubeRanges(layout)
	if r.extPrefix != "" {
		out = append(out, keyRange{r.extPrefix, clientv3.GetPrefixRangeEnd(r.extPrefix)})
	}
	return out
}

// errNoResource marks a key in the watched range that belongs to no
// registered resource: a resource that this agent does not use (a reflector
// may reflect more than one agent registers). It is skipped and counted, not
// warned about.
var errNoResource = errors.New("watcher: key of an unregistered resource")

// keyKind tells which part of the key space an etcd key belongs to.
type keyKind int

const (
	foreignKey keyKind = iota // neither prefix: ignored silently
	kubeKey
	extKey
	// flatKey is the key of a per-node resource (a pod) under its key
	// prefix in kubemodel.LayoutNodePods, where it is stored per node: a
	// leftover of the flat layout, or the write of a reflector of it.
	flatKey
	// layoutKey is kubemodel.LayoutKey.
	layoutKey
)

// kindOf returns the part of the key space key belongs to and the key
// relative to that part's prefix (Kubernetes keys: relative to kubePrefix,
// when inside kubeWatch). When the watched Kubernetes range and the external
// prefix contain each other, the longer match wins.
func (r *registry) kindOf(key string) (keyKind, string) {
	kube := strings.HasPrefix(key, r.kubeWatch)
	ext := r.extPrefix != "" && strings.HasPrefix(key, r.extPrefix)
	switch {
	case kube && ext:
		if len(r.extPrefix) > len(r.kubeWatch) {
			return extKey, key[len(r.extPrefix):]
		}
		return kubeKey, key[len(r.kubePrefix):]
	case kube:
		return kubeKey, key[len(r.kubePrefix):]
	case ext:
		return extKey, key[len(r.extPrefix):]
	}
	return foreignKey, ""
}

// classify is kindOf in a layout: in kubemodel.LayoutNodePods a key under
// a per-node resource's node key prefix is a Kubernetes key (rel is the
// object's key, under the resource's key prefix) and a key under its key
// prefix is a flatKey; in kubemodel.LayoutFlat keys under node key
// prefixes are foreign. The layout key is layoutKey in either.
func (r *registry) classify(key string, layout int) (keyKind, string) {
	if key == r.layoutKey {
		return layoutKey, kubemodel.LayoutKey
	}
	kind, rel := r.kindOf(key)
	if kind != kubeKey {
		return kind, rel
	}
	for _, res := range r.perNode {
		if strings.HasPrefix(rel, res.NodeKeyPrefix) {
			if layout == kubemodel.LayoutFlat {
				return foreignKey, ""
			}
			_, obj, err := res.ParseNodeKey(rel)
			if err != nil {
				// Not a key of the resource: reported as a bad key of it.
				return kubeKey, rel
			}
			return kubeKey, obj
		}
		if layout != kubemodel.LayoutFlat && strings.HasPrefix(rel, res.KeyPrefix) {
			return flatKey, rel
		}
	}
	return kubeKey, rel
}

// resourceOf returns the resource of rel, a key relative to the
// Kubernetes-state prefix, after checking the key against the resource's
// key scheme.
func (r *registry) resourceOf(rel string) (*kubemodel.Resource, error) {
	for i := range r.resources {
		res := &r.resources[i]
		if res.NodeKeyPrefix != "" && strings.HasPrefix(rel, res.NodeKeyPrefix) {
			if _, _, err := res.ParseNodeKey(rel); err != nil {
				return nil, fmt.Errorf("%w: %w", ErrBadKey, err)
			}
			return res, nil
		}
		if !strings.HasPrefix(rel, res.KeyPrefix) {
			continue
		}
		if _, _, err := res.ParseKey(rel); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrBadKey, err)
		}
		return res, nil
	}
	return nil, fmt.Errorf("%w: %q", errNoResource, rel)
}

// resourceNameOf returns the name of the resource whose key prefix rel
// (relative to the Kubernetes-state prefix) matches, without checking the
// key scheme; empty when none does.
func (r *registry) resourceNameOf(rel string) string {
	for i := range r.resources {
		res := &r.resources[i]
		if strings.HasPrefix(rel, res.KeyPrefix) || (res.NodeKeyPrefix != "" && strings.HasPrefix(rel, res.NodeKeyPrefix)) {
			return res.Name
		}
	}
	return ""
}

// decodeKube decodes the value of a Kubernetes-state key.
func (r *registry) decodeKube(res *kubemodel.Resource, rel string, raw []byte) (proto.Message, error) {
	msg := res.NewValue()
	if err := proto.Unmarshal(raw, msg); err != nil {
		return nil, fmt.Errorf("%w: %s %q: %w", ErrBadValue, res.Name, rel, err)
	}
	return msg, nil
}

// decodeExt decodes an external-configuration value: a serialized
// google.protobuf.Any whose type URL the resolver knows.
func (r *registry) decodeExt(rel string, raw []byte) (proto.Message, error) {
	if rel == "" {
		return nil, fmt.Errorf("%w: empty external configuration key", ErrBadKey)
	}
	var a anypb.Any
	if err := proto.Unmarshal(raw, &a); err != nil {
		return nil, fmt.Errorf("%w: external config %q: not a google.protobuf.Any: %w", ErrBadValue, rel, err)
	}
	if a.GetTypeUrl() == "" {
		return nil, fmt.Errorf("%w: external config %q: google.protobuf.Any without a type URL", ErrBadValue, rel)
	}
	mt, err := r.types.FindMessageByURL(a.GetTypeUrl())
	if err != nil {
		return nil, fmt.Errorf("%w: external config %q: type %s: %w", ErrBadValue, rel, a.GetTypeUrl(), err)
	}
	msg := mt.New().Interface()
	if err := proto.Unmarshal(a.GetValue(), msg); err != nil {
		return nil, fmt.Errorf("%w: external config %q (%s): %w", ErrBadValue, rel, a.GetTypeUrl(), err)
	}
	return msg, nil
}

// decodeRel decodes the value of rel, a key relative to the prefix of kind
// (kubeKey or extKey). res is nil for external configuration.
func (r *registry) decodeRel(kind keyKind, rel string, raw []byte) (res *kubemodel.Resource, msg proto.Message, err error) {
	if kind == extKey {
		msg, err = r.decodeExt(rel, raw)
		return nil, msg, err
	}
	if res, err = r.resourceOf(rel); err != nil {
		return nil, nil, err
	}
	msg, err = r.decodeKube(res, rel, raw)
	return res, msg, err
}
