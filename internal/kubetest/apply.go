package kubetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
)

// DecodeYAML returns the objects of a multi-document YAML (or JSON)
// stream, skipping empty documents.
func DecodeYAML(b []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	var out []*unstructured.Unstructured
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("kubetest: decode YAML: %w", err)
		}
		if len(m) == 0 {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
}

// ApplyOptions tune [Apply].
type ApplyOptions struct {
	// FieldManager of the server-side apply; default "kubectl", as
	// `kubectl apply --server-side` sends.
	FieldManager string
	// DryRun applies with dryRun=All: the server validates, admits and
	// authorizes everything and stores nothing.
	DryRun bool
}

// Apply applies objs with server-side apply (force, like kubectl apply
// --server-side --force-conflicts), in order, through cfg's identity, and
// returns what the server answered. A kind that the server does not know
// yet (a custom resource whose definition was just applied) is retried
// for up to 30 s while discovery catches up.
func Apply(ctx context.Context, cfg *rest.Config, objs []*unstructured.Unstructured, opts ApplyOptions) ([]*unstructured.Unstructured, error) {
	if opts.FieldManager == "" {
		opts.FieldManager = "kubectl"
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubetest: %w", err)
	}
	cached := memory.NewMemCacheClient(dc)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(cached)
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubetest: %w", err)
	}
	ao := metav1.ApplyOptions{FieldManager: opts.FieldManager, Force: true}
	if opts.DryRun {
		ao.DryRun = []string{metav1.DryRunAll}
	}
	var out []*unstructured.Unstructured
	for _, obj := range objs {
		gvk := obj.GroupVersionKind()
		var m *meta.RESTMapping
		deadline := time.Now().Add(30 * time.Second)
		for {
			m, err = mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
			if err == nil || !meta.IsNoMatchError(err) || time.Now().After(deadline) {
				break
			}
			mapper.Reset()
			select {
			case <-ctx.Done():
				return out, ctx.Err()
			case <-time.After(200 * time.Millisecond):
			}
		}
		if err != nil {
			return out, fmt.Errorf("kubetest: %s %s: %w", gvk.Kind, obj.GetName(), err)
		}
		var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			ns := obj.GetNamespace()
			if ns == "" {
				ns = "default"
			}
			ri = dyn.Resource(m.Resource).Namespace(ns)
		}
		res, err := ri.Apply(ctx, obj.GetName(), obj, ao)
		if err != nil {
			return out, fmt.Errorf("kubetest: apply %s %s/%s: %w", gvk.Kind, obj.GetNamespace(), obj.GetName(), err)
		}
		out = append(out, res)
	}
	return out, nil
}

// CRDGroupVersionResource is the resource of CustomResourceDefinitions.
var CRDGroupVersionResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// InstallCRDs applies the CustomResourceDefinitions in files (any other
// document is an error) and waits until each is Established, so that
// its resource can be listed and watched.
func InstallCRDs(ctx context.Context, cfg *rest.Config, files ...string) error {
	var crds []*unstructured.Unstructured
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return fmt.Errorf("kubetest: %w", err)
		}
		objs, err := DecodeYAML(b)
		if err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		for _, o := range objs {
			if o.GetKind() != "CustomResourceDefinition" {
				return fmt.Errorf("kubetest: %s: %s %s is not a CustomResourceDefinition", f, o.GetKind(), o.GetName())
			}
		}
		crds = append(crds, objs...)
	}
	if _, err := Apply(ctx, cfg, crds, ApplyOptions{}); err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("kubetest: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for _, crd := range crds {
		for {
			got, err := dyn.Resource(CRDGroupVersionResource).Get(ctx, crd.GetName(), metav1.GetOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("kubetest: CRD %s: %w", crd.GetName(), err)
			}
			if err == nil && crdEstablished(got) {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("kubetest: CRD %s not established: %w", crd.GetName(), ctx.Err())
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return nil
}

func crdEstablished(crd *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == "Established" && m["status"] == "True" {
			return true
		}
	}
	return false
}

// CRDFiles returns the YAML files under root that define
// CustomResourceDefinitions: the repository's CRD folders, wherever a
// package keeps its definitions (bgp/bgpreflector/crd.yaml, ...), sorted.
// Folders named testdata, hidden folders, tools/ and deploy/ (which holds
// copies for installation) are not searched.
func CRDFiles(root string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			rel, _ := filepath.Rel(root, path)
			name := d.Name()
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || rel == "tools" || rel == "deploy") {
				return filepath.SkipDir
			}
			return nil
		}
		if ext := filepath.Ext(path); ext != ".yaml" && ext != ".yml" {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		objs, err := DecodeYAML(b)
		if err != nil {
			return nil // not a manifest (e.g. a program's configuration)
		}
		if slices.ContainsFunc(objs, func(o *unstructured.Unstructured) bool {
			return o.GetKind() == "CustomResourceDefinition" && strings.HasPrefix(o.GetAPIVersion(), "apiextensions.k8s.io/")
		}) {
			out = append(out, path)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("kubetest: find CRDs: %w", err)
	}
	slices.Sort(out)
	return out, nil
}
