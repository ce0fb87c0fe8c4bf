package svcprocessor

import (
	"errors"
	"fmt"

	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
)

var (
	// ErrClosed is returned by every method called after [ServiceProcessor.Close].
	ErrClosed = errors.New("svcprocessor: processor is closed")

	// ErrNilRenderer is returned by [ServiceProcessor.RegisterRenderer] for a nil renderer.
	ErrNilRenderer = errors.New("svcprocessor: nil renderer")

	// ErrUnexpectedValue is returned (wrapped) when a Kubernetes state value
	// is not of the type its resource implies (for example a *kubemodel.Pod
	// under "service"), when a service or endpoints value has no
	// namespace/name, or when a key does not follow the key scheme or names
	// another service than the value's namespace/name. For bad input of one
	// key the error is a [controller.KeyError] for that key, which the event
	// loop reports without healing (see the package documentation).
	ErrUnexpectedValue = errors.New("svcprocessor: unexpected Kubernetes state value")

	// ErrPodNotConnected is returned (wrapped) by [ServiceProcessor.ProcessNewPod]
	// when [PodInterfaces] does not know the VPP interface of the pod.
	ErrPodNotConnected = errors.New("svcprocessor: pod has no VPP interface on this node")
)

// RendererError reports that a renderer failed to apply a change. The
// processor's own state already includes the change; the other renderers
// were notified as well. Several RendererErrors are joined with errors.Join.
// Use errors.As to get at it.
type RendererError struct {
	// Index is the position of the renderer in registration order.
	Index int
	// Kind is the kind of the notification that failed.
	Kind RenderKind
	// Err is what the renderer returned.
	Err error
}

func (e *RendererError) Error() string {
	return fmt.Sprintf("svcprocessor: renderer %d failed on %s: %v", e.Index, e.Kind, e.Err)
}

// Unwrap returns the renderer's error.
func (e *RendererError) Unwrap() error { return e.Err }

// SkippedError describes one malformed part of an otherwise valid service
// (an IP that does not parse, a port number out of range) that the
// processor left out of the service's view. The processor logs each one
// at Warn once, when it appears, counts the current ones per reason in
// [Stats.Skipped] and lists them in [ServiceProcessor.Skipped] until the
// service is fixed or deleted. It is a comparable value, immutable once
// returned.
type SkippedError struct {
	// Service is the service (or its endpoints) the part belongs to.
	Service kubemodel.ServiceID
	// Reason is why the part was skipped.
	Reason SkipReason
	// Field is the path of the part, e.g. `ports["http"].port`,
	// "clusterIPs" or "endpoints.addresses".
	Field string
	// Value is the offending value as given.
	Value string
}

func (e *SkippedError) Error() string {
	return fmt.Sprintf("svcprocessor: service %s: %s %s: %s", e.Service, e.Field, e.Value, e.Reason.describe())
}
