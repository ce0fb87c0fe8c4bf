package nodesync

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
)

// ReleaseNode frees the node ID(s) and deletes the vswitch record of the
// node named nodeName, so that its ID can be allocated to a joining node. It
// returns the IDs that were released (none if the node had none).
//
// Who frees IDs: nodes never free their own ID (a restarting node must get
// it back). The cluster-level component that sees Kubernetes nodes being
// deleted - the reflector or an operator - calls ReleaseNode (directly or
// through [Releaser]) once the Kubernetes node object is gone, i.e. when no
// agent can be running for that node any more. Releasing a node whose agent
// still runs makes its Run return [ErrNodeReleased].
//
// prefix is the nodesync key prefix (Config.Prefix, "" for DefaultPrefix).
// Each claim is removed with a compare-delete against the revision it was
// read at, so a concurrent release can never remove a claim that another
// node has made meanwhile. The call is bounded by ctx; it is safe to repeat
// after a failure.
func ReleaseNode(ctx context.Context, db ClusterWideDB, prefix, nodeName string) ([]uint32, error) {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	if !strings.HasSuffix(prefix, "/") {
		return nil, fmt.Errorf("nodesync: release node: prefix %q must end in /", prefix)
	}
	if err := kubemodel.ValidateName(nodeName); err != nil {
		return nil, fmt.Errorf("nodesync: release node: %w", err)
	}
	broker := db.NewBroker(prefix)
	list, err := broker.List(ctx, idKeyPrefix)
	if err != nil {
		return nil, fmt.Errorf("nodesync: release node %s: %w", nodeName, err)
	}
	// The record goes first: a still running agent notices and stops.
	if _, err := broker.Delete(ctx, nodeKey(nodeName), 0); err != nil {
		return nil, fmt.Errorf("nodesync: release node %s: %w", nodeName, err)
	}
	var released []uint32
	var errs []error
	for _, kv := range list.KVs {
		id, name, err := parseClaim(kv.Key, kv.Value)
		if err != nil || name != nodeName {
			continue
		}
		existed, err := broker.Delete(ctx, kv.Key, kv.ModRevision)
		if err != nil {
			errs = append(errs, fmt.Errorf("nodesync: release node %s: ID %d: %w", nodeName, id, err))
			continue
		}
		if existed {
			released = append(released, id)
		}
	}
	slices.Sort(released)
	return released, errors.Join(errs...)
}

// Releaser is a [controller.EventHandler] for the cluster-level event loop
// (of the reflector or an operator, not of the vswitch agents): when a
// Kubernetes node object is deleted (a KubeStateChange of resource "node"
// with a nil NewValue) it calls [ReleaseNode] for that node, bounded by
// Config.RequestTimeout. A failed release is returned as the handler's
// error; calling ReleaseNode again is safe. Releaser does nothing on
// resyncs: it never guesses that a node is gone from its absence.
//
// Releaser is safe for concurrent use.
type Releaser struct {
	db  ClusterWideDB
	cfg Config
	log *slog.Logger
}

var _ controller.EventHandler = (*Releaser)(nil)

// NewReleaser returns a Releaser for the records under cfg.Prefix in db.
// Only Prefix, Logger and RequestTimeout of cfg are used.
func NewReleaser(db ClusterWideDB, cfg Config) (*Releaser, error) {
	if db == nil {
		return nil, errors.New("nodesync: nil ClusterWideDB")
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Releaser{db: db, cfg: cfg, log: cfg.Logger.With(slog.String("component", "nodesync-releaser"))}, nil
}

// String returns "nodesync-releaser".
func (r *Releaser) String() string { return "nodesync-releaser" }

// HandlesEvent selects deletions of Kubernetes nodes.
func (r *Releaser) HandlesEvent(event controller.Event) bool {
	ev, ok := event.(*controller.KubeStateChange)
	return ok && ev.Resource == kubemodel.NodeResource && ev.NewValue == nil
}

// Resync does nothing.
func (r *Releaser) Resync(controller.Event, controller.KubeStateData, int, controller.ResyncOperations) error {
	return nil
}

// Update releases the ID and record of the deleted node.
func (r *Releaser) Update(event controller.Event, _ controller.UpdateOperations) (string, error) {
	ev, ok := event.(*controller.KubeStateChange)
	if !ok {
		return "", nil
	}
	name, err := kubemodel.ParseNodeKey(ev.Key)
	if err != nil {
		r.log.Warn("skipping node deletion with malformed key", slog.Any("error", err))
		return "", nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.cfg.RequestTimeout)
	defer cancel()
	ids, err := ReleaseNode(ctx, r.db, r.cfg.Prefix, name)
	if err != nil {
		return "", err
	}
	r.log.Info("released node", slog.String("node", name), slog.Any("ids", ids))
	return fmt.Sprintf("released node %s (IDs %v)", name, ids), nil
}

// Revert does nothing.
func (r *Releaser) Revert(controller.Event) error { return nil }
