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
	return &registry{
		kubePrefix: cfg.KubeStatePrefix,
		kubeWatch:  cfg.KubeStatePrefix + commonRoot(all),
		extPrefix:  cfg.ExternalConfigPrefix,
		resources:  all,
		names:      names,
		types:      cfg.ExternalConfigTypes,
	}, nil
}

// commonRoot returns the longest common prefix of the resources' key
// prefixes that ends in "/" (empty if they share none).
func commonRoot(rs []kubemodel.Resource) string {
	if len(rs) == 0 {
		return ""
	}
	root := rs[0].KeyPrefix
	for _, r := range rs[1:] {
		n := 0
		for n < len(root) && n < len(r.KeyPrefix) && root[n] == r.KeyPrefix[n] {
			n++
		}
		root = root[:n]
	}
	return root[:strings.LastIndexByte(root, '/')+1]
}

// keyRange is the range [start, end) of etcd keys.
type keyRange struct{ start, end string }

// snapshotRanges returns the ranges a snapshot reads: the watched
// Kubernetes range and, if set, the external-configuration prefix.
func (r *registry) snapshotRanges() []keyRange {
	out := []keyRange{{r.kubeWatch, clientv3.GetPrefixRangeEnd(r.kubeWatch)}}
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

// resourceOf returns the resource of rel, a key relative to the
// Kubernetes-state prefix, after checking the key against the resource's
// key scheme.
func (r *registry) resourceOf(rel string) (*kubemodel.Resource, error) {
	for i := range r.resources {
		res := &r.resources[i]
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
		if strings.HasPrefix(rel, r.resources[i].KeyPrefix) {
			return r.resources[i].Name
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
