package svcprocessor

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
)

// ResyncEventData wraps an entire state of Kubernetes services that should
// be reflected into VPP: the input of [ServiceProcessor.Resync], taken out
// of controller.KubeStateData. It is a plain value, not safe for concurrent
// use while being modified. The zero value is an empty state.
//
// The Contiv IPAllocations field (custom IP allocation CRDs) has no
// counterpart here.
type ResyncEventData struct {
	Pods      []kubemodel.PodID
	Endpoints []*kubemodel.Endpoints
	Services  []*kubemodel.Service
}

// NewResyncEventData creates an empty instance of ResyncEventData.
func NewResyncEventData() *ResyncEventData { return &ResyncEventData{} }

// String converts ResyncEventData into a human-readable string.
func (red ResyncEventData) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "ResyncEventData <pods: %d, services: %d, endpoints: %d>", len(red.Pods), len(red.Services), len(red.Endpoints))
	return b.String()
}

// ParseResyncEventData takes the pods, services and endpoints out of
// Kubernetes state data. It fails (nil data) with [ErrUnexpectedValue] for
// values of the wrong type and for services or endpoints without
// namespace/name (pods without them are named after their key). A service or
// endpoints value under a key that does not follow the key scheme or names
// another service is left out: then it returns the data of the rest together
// with an error joining one [controller.KeyError] per such key, each
// wrapping ErrUnexpectedValue. Slices are sorted by ID.
func ParseResyncEventData(ksd controller.KubeStateData) (*ResyncEventData, error) {
	red, skipped, err := parseResyncEventData(ksd, true)
	if err != nil {
		return nil, err
	}
	return red, errors.Join(skipped...)
}

// parseResyncEventData returns the data, the KeyErrors of skipped values,
// and an error that fails the whole parse.
func parseResyncEventData(ksd controller.KubeStateData, sorted bool) (red *ResyncEventData, skipped []error, err error) {
	red = &ResyncEventData{}
	if pods := ksd[kubemodel.PodResource]; len(pods) > 0 {
		red.Pods = make([]kubemodel.PodID, 0, len(pods))
		for key, v := range pods {
			p, ok := v.(*kubemodel.Pod)
			if !ok {
				return nil, nil, fmt.Errorf("%w: key %s: want *kubemodel.Pod, got %T", ErrUnexpectedValue, key, v)
			}
			id := p.ID()
			if id.Name == "" || id.Namespace == "" {
				kid, err := kubemodel.ParsePodKey(keySuffix(key, kubemodel.PodKeyPrefix))
				if err != nil {
					return nil, nil, fmt.Errorf("%w: pod without name: %w", ErrUnexpectedValue, err)
				}
				id = kid
			}
			red.Pods = append(red.Pods, id)
		}
		if sorted {
			slices.SortFunc(red.Pods, comparePodID)
		}
	}
	if svcs := ksd[kubemodel.ServiceResource]; len(svcs) > 0 {
		red.Services = make([]*kubemodel.Service, 0, len(svcs))
		for key, v := range svcs {
			s, ok := v.(*kubemodel.Service)
			if !ok {
				return nil, nil, fmt.Errorf("%w: key %s: want *kubemodel.Service, got %T", ErrUnexpectedValue, key, v)
			}
			if s.GetName() == "" || s.GetNamespace() == "" {
				return nil, nil, fmt.Errorf("%w: key %s: service without namespace/name", ErrUnexpectedValue, key)
			}
			if err := checkKey(key, kubemodel.ServiceKeyPrefix, s.ID()); err != nil {
				skipped = append(skipped, err)
				continue
			}
			red.Services = append(red.Services, s)
		}
		if sorted {
			slices.SortFunc(red.Services, func(a, b *kubemodel.Service) int { return compareSvcID(a.ID(), b.ID()) })
		}
	}
	if epss := ksd[kubemodel.EndpointsResource]; len(epss) > 0 {
		red.Endpoints = make([]*kubemodel.Endpoints, 0, len(epss))
		for key, v := range epss {
			e, ok := v.(*kubemodel.Endpoints)
			if !ok {
				return nil, nil, fmt.Errorf("%w: key %s: want *kubemodel.Endpoints, got %T", ErrUnexpectedValue, key, v)
			}
			if e.GetName() == "" || e.GetNamespace() == "" {
				return nil, nil, fmt.Errorf("%w: key %s: endpoints without namespace/name", ErrUnexpectedValue, key)
			}
			if err := checkKey(key, kubemodel.EndpointsKeyPrefix, e.ID()); err != nil {
				skipped = append(skipped, err)
				continue
			}
			red.Endpoints = append(red.Endpoints, e)
		}
		if sorted {
			slices.SortFunc(red.Endpoints, func(a, b *kubemodel.Endpoints) int { return compareSvcID(a.ID(), b.ID()) })
		}
	}
	return red, skipped, nil
}

// checkKey returns a KeyError (see badKey) unless key is a key of the
// service id.
func checkKey(key, prefix string, id kubemodel.ServiceID) error {
	kid, err := idFromKey(key, prefix)
	if err == nil {
		err = checkNames(kid, id.Namespace, id.Name)
	}
	if err != nil {
		return badKey(key, err)
	}
	return nil
}

func compareSvcID(a, b kubemodel.ServiceID) int {
	return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
}

func keySuffix(key, prefix string) string {
	if i := strings.Index(key, prefix); i >= 0 {
		return key[i:]
	}
	return key
}
