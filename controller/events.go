package controller

import (
	"fmt"
	"strings"
	"sync"

	"google.golang.org/protobuf/proto"

	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/controller/podiface"
)

// result delivers the outcome of a blocking event to the goroutine that
// waits in Wait. Its zero value belongs to an event that was not created with
// its constructor: Done does nothing and Wait returns ErrNotConstructed.
type result struct {
	ch   chan error // buffered, capacity 1; nil for non-blocking events
	once sync.Once
}

func newResult(blocking bool) result {
	if !blocking {
		return result{}
	}
	return result{ch: make(chan error, 1)}
}

func (r *result) blocking() bool { return r.ch != nil }

func (r *result) done(err error) {
	if r.ch == nil {
		return
	}
	r.once.Do(func() { r.ch <- err })
}

func (r *result) wait() error {
	if r.ch == nil {
		return ErrNotConstructed
	}
	err := <-r.ch
	r.ch <- err // let a second Wait return the same result
	return err
}

// DBResync is a Resync Event that carries a snapshot of the database for all
// watched Kubernetes resources and the external configuration.
type DBResync struct {
	// Local is true when the snapshot comes from the local mirror because
	// the remote database was unreachable.
	Local          bool
	KubeState      KubeStateData
	ExternalConfig KeyValuePairs
}

// NewDBResync is a constructor for DBResync with empty data.
func NewDBResync() *DBResync {
	return &DBResync{KubeState: NewKubeStateData(), ExternalConfig: make(KeyValuePairs)}
}

// GetName returns the name of the DBResync event.
func (ev *DBResync) GetName() string { return "Database Resync" }

// String describes the DBResync event.
func (ev *DBResync) String() string {
	var b strings.Builder
	b.WriteString(ev.GetName())
	if ev.Local {
		b.WriteString(" (local)")
	}
	fmt.Fprintf(&b, ": %d resources, %d external config keys", len(ev.KubeState), len(ev.ExternalConfig))
	return b.String()
}

// Method is FullResync.
func (ev *DBResync) Method() EventMethodType { return FullResync }

// IsBlocking returns false.
func (ev *DBResync) IsBlocking() bool { return false }

// Done is a no-op.
func (ev *DBResync) Done(error) {}

// KubeStateChange is an Update event that represents a change of one key of
// the Kubernetes state data.
type KubeStateChange struct {
	Key       string
	Resource  string
	PrevValue proto.Message // nil if newly added
	NewValue  proto.Message // nil if deleted
}

// GetName returns the name of the KubeStateChange event.
func (ev *KubeStateChange) GetName() string { return "Kubernetes State Change" }

// String describes the KubeStateChange event.
func (ev *KubeStateChange) String() string {
	op := "update"
	switch {
	case ev.PrevValue == nil:
		op = "add"
	case ev.NewValue == nil:
		op = "delete"
	}
	return "Kubernetes State Change: " + op + " " + ev.Resource + " " + ev.Key
}

// Method is Update.
func (ev *KubeStateChange) Method() EventMethodType { return Update }

// TransactionType is BestEffort.
func (ev *KubeStateChange) TransactionType() UpdateTransactionType { return BestEffort }

// Direction is Forward.
func (ev *KubeStateChange) Direction() UpdateDirectionType { return Forward }

// IsBlocking returns false.
func (ev *KubeStateChange) IsBlocking() bool { return false }

// Done is a no-op.
func (ev *KubeStateChange) Done(error) {}

// ExternalConfigChange is an Update event that represents a change of one or
// more keys of the external configuration of one source. A nil value in
// UpdatedKVs deletes the key from the source.
type ExternalConfigChange struct {
	Source     string
	UpdatedKVs KeyValuePairs
	res        result
}

// NewExternalConfigChange is a constructor for ExternalConfigChange.
func NewExternalConfigChange(source string, blocking bool) *ExternalConfigChange {
	return &ExternalConfigChange{Source: source, UpdatedKVs: make(KeyValuePairs), res: newResult(blocking)}
}

// GetName returns the name of the ExternalConfigChange event.
func (ev *ExternalConfigChange) GetName() string { return "External Config Change" }

// String describes the ExternalConfigChange event.
func (ev *ExternalConfigChange) String() string {
	return fmt.Sprintf("External Config Change (source %s): %d keys", ev.Source, len(ev.UpdatedKVs))
}

// Method is Update.
func (ev *ExternalConfigChange) Method() EventMethodType { return Update }

// TransactionType is BestEffort.
func (ev *ExternalConfigChange) TransactionType() UpdateTransactionType { return BestEffort }

// Direction is Forward.
func (ev *ExternalConfigChange) Direction() UpdateDirectionType { return Forward }

// IsBlocking returns what was given to the constructor.
func (ev *ExternalConfigChange) IsBlocking() bool { return ev.res.blocking() }

// Done propagates the error to the event producer.
func (ev *ExternalConfigChange) Done(err error) { ev.res.done(err) }

// Wait waits for the result of the ExternalConfigChange event.
func (ev *ExternalConfigChange) Wait() error { return ev.res.wait() }

// ExternalConfigResync is a Resync event triggered by an external config
// source: it replaces the complete configuration of that source. External
// config from the remote database uses DBResync instead.
//
// Its Method is UpstreamResync (the reference text says Update, but the
// event carries a complete snapshot and handlers are called through Resync).
type ExternalConfigResync struct {
	Source         string
	ExternalConfig KeyValuePairs
	res            result
}

// NewExternalConfigResync is a constructor for ExternalConfigResync.
func NewExternalConfigResync(source string, blocking bool) *ExternalConfigResync {
	return &ExternalConfigResync{Source: source, ExternalConfig: make(KeyValuePairs), res: newResult(blocking)}
}

// GetName returns the name of the ExternalConfigResync event.
func (ev *ExternalConfigResync) GetName() string { return "External Config Resync" }

// String describes the ExternalConfigResync event.
func (ev *ExternalConfigResync) String() string {
	return fmt.Sprintf("External Config Resync (source %s): %d keys", ev.Source, len(ev.ExternalConfig))
}

// Method is UpstreamResync.
func (ev *ExternalConfigResync) Method() EventMethodType { return UpstreamResync }

// IsBlocking returns what was given to the constructor.
func (ev *ExternalConfigResync) IsBlocking() bool { return ev.res.blocking() }

// Done propagates the error to the event producer.
func (ev *ExternalConfigResync) Done(err error) { ev.res.done(err) }

// Wait waits for the result of the ExternalConfigResync event.
func (ev *ExternalConfigResync) Wait() error { return ev.res.wait() }

// HealingResyncType is either Periodic or AfterError.
type HealingResyncType int

const (
	// Periodic healing resync, when enabled in the configuration, is run
	// periodically to trigger the downstream resync (the southbound
	// re-applies the committed state to the data plane).
	Periodic HealingResyncType = iota

	// AfterError healing resync is triggered after an event processing ended
	// with an error.
	AfterError
)

// String returns the name of the healing type.
func (t HealingResyncType) String() string {
	if t == Periodic {
		return "Periodic"
	}
	return "AfterError"
}

// HealingResync is supposed to "heal" the vswitch. It is run either after an
// error occurred or periodically.
type HealingResync struct {
	Type  HealingResyncType
	Error error // non-nil if the resync is of type AfterError
}

// GetName returns the name of the HealingResync event.
func (ev *HealingResync) GetName() string { return "Healing Resync" }

// String describes the HealingResync event.
func (ev *HealingResync) String() string {
	if ev.Type == AfterError && ev.Error != nil {
		return "Healing Resync (after error: " + ev.Error.Error() + ")"
	}
	return "Healing Resync (" + ev.Type.String() + ")"
}

// Method is DownstreamResync for periodic healing, otherwise FullResync is
// used to heal after an error.
func (ev *HealingResync) Method() EventMethodType {
	if ev.Type == Periodic {
		return DownstreamResync
	}
	return FullResync
}

// IsBlocking returns false.
func (ev *HealingResync) IsBlocking() bool { return false }

// Done is a no-op.
func (ev *HealingResync) Done(error) {}

// Shutdown event is processed when the loop is being closed: handlers may
// delete what they own (through the transaction), then the loop ends.
type Shutdown struct {
	res result
}

// NewShutdownEvent is a constructor for the Shutdown event.
func NewShutdownEvent() *Shutdown { return &Shutdown{res: newResult(true)} }

// GetName returns the name of the Shutdown event.
func (ev *Shutdown) GetName() string { return "Shutdown" }

// String describes the Shutdown event.
func (ev *Shutdown) String() string { return "Shutdown" }

// Method is Update.
func (ev *Shutdown) Method() EventMethodType { return Update }

// TransactionType is BestEffort.
func (ev *Shutdown) TransactionType() UpdateTransactionType { return BestEffort }

// Direction is Forward.
func (ev *Shutdown) Direction() UpdateDirectionType { return Forward }

// IsBlocking returns true.
func (ev *Shutdown) IsBlocking() bool { return true }

// Done propagates the error to the event producer.
func (ev *Shutdown) Done(err error) { ev.res.done(err) }

// Wait waits until the Shutdown event was processed.
func (ev *Shutdown) Wait() error { return ev.res.wait() }

// AddPod is a blocking Update event pushed by the pod server (the CNI
// server) when a pod is created; handlers connect the pod and fill in
// Interfaces and Routes. It is RevertOnFailure and flows Forward.
//
// The pod server does the work in the pod's network namespace: for
// [podiface.AfPacket] it creates the veth pair before it pushes AddPod
// (HostIfName names the host end), and it configures addresses, routes and
// neighbor entries from the results after the event succeeded.
type AddPod struct {
	Pod              kubemodel.PodID
	ContainerID      string
	NetworkNamespace string
	// IfName is the name of the pod's interface inside its network
	// namespace (CNI_IFNAME); empty means "eth0".
	IfName string
	// InterfaceType is the requested interface type; podiface.Default
	// lets the pod handler choose.
	InterfaceType podiface.Type
	// HostIfName is, for podiface.AfPacket, the name of the host end of
	// the veth pair that the pod server created.
	HostIfName string
	// IPAMType and IPAMData are taken from the CNI configuration for
	// external IPAM plugins; empty for the built-in IPAM.
	IPAMType string
	IPAMData string

	// Results filled in by handlers.
	Interfaces []podiface.Interface
	Routes     []podiface.Route

	res result
}

// Attachment returns the request part of ev.
func (ev *AddPod) Attachment() podiface.Attachment {
	return podiface.Attachment{
		Pod: ev.Pod, ContainerID: ev.ContainerID, NetworkNamespace: ev.NetworkNamespace,
		IfName: ev.IfName, InterfaceType: ev.InterfaceType, HostIfName: ev.HostIfName,
	}
}

// NewAddPodEvent is a constructor for AddPod.
func NewAddPodEvent(pod kubemodel.PodID, containerID, netns string) *AddPod {
	return &AddPod{Pod: pod, ContainerID: containerID, NetworkNamespace: netns, res: newResult(true)}
}

// GetName returns the name of the AddPod event.
func (ev *AddPod) GetName() string { return "Add Pod" }

// String describes the AddPod event.
func (ev *AddPod) String() string {
	return "Add Pod " + ev.Pod.String() + " (container " + ev.ContainerID + ")"
}

// Method is Update.
func (ev *AddPod) Method() EventMethodType { return Update }

// TransactionType is RevertOnFailure.
func (ev *AddPod) TransactionType() UpdateTransactionType { return RevertOnFailure }

// Direction is Forward.
func (ev *AddPod) Direction() UpdateDirectionType { return Forward }

// IsBlocking returns true.
func (ev *AddPod) IsBlocking() bool { return true }

// Done propagates the error to the CNI server.
func (ev *AddPod) Done(err error) { ev.res.done(err) }

// Wait waits for the result of the AddPod event.
func (ev *AddPod) Wait() error { return ev.res.wait() }

// DeletePod is a blocking Update event pushed by the CNI server when a pod is
// deleted. It is BestEffort and flows Reverse, so every handler still sees
// its dependencies in the pre-delete state.
type DeletePod struct {
	Pod         kubemodel.PodID
	ContainerID string

	res result
}

// NewDeletePodEvent is a constructor for DeletePod.
func NewDeletePodEvent(pod kubemodel.PodID, containerID string) *DeletePod {
	return &DeletePod{Pod: pod, ContainerID: containerID, res: newResult(true)}
}

// GetName returns the name of the DeletePod event.
func (ev *DeletePod) GetName() string { return "Delete Pod" }

// String describes the DeletePod event.
func (ev *DeletePod) String() string {
	return "Delete Pod " + ev.Pod.String() + " (container " + ev.ContainerID + ")"
}

// Method is Update.
func (ev *DeletePod) Method() EventMethodType { return Update }

// TransactionType is BestEffort.
func (ev *DeletePod) TransactionType() UpdateTransactionType { return BestEffort }

// Direction is Reverse.
func (ev *DeletePod) Direction() UpdateDirectionType { return Reverse }

// IsBlocking returns true.
func (ev *DeletePod) IsBlocking() bool { return true }

// Done propagates the error to the CNI server.
func (ev *DeletePod) Done(err error) { ev.res.done(err) }

// Wait waits for the result of the DeletePod event.
func (ev *DeletePod) Wait() error { return ev.res.wait() }

// Compile-time checks of the documented event kinds.
var (
	_ Event       = (*DBResync)(nil)
	_ UpdateEvent = (*KubeStateChange)(nil)
	_ UpdateEvent = (*ExternalConfigChange)(nil)
	_ Event       = (*ExternalConfigResync)(nil)
	_ Event       = (*HealingResync)(nil)
	_ UpdateEvent = (*Shutdown)(nil)
	_ UpdateEvent = (*AddPod)(nil)
	_ UpdateEvent = (*DeletePod)(nil)
)
