package nodesync

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
)

// ReleaseNode frees the node ID and deletes the vswitch record of the node
// named nodeName, so that its ID can be allocated to a joining node. It
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
// The record, the claim and a free-ID hint for the next joiner are changed
// in one transaction, compared against the revisions read, so a concurrent
// join or release can never lose or duplicate an ID. It reads O(1) keys,
// except for records left inconsistent (by a crash of an older version):
// then it reads all claims once. A node still waiting for its ID gives back
// the ticket it holds. The call is bounded by ctx; it is safe to repeat
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
	for {
		ids, done, err := releaseOnce(ctx, broker, nodeName)
		if err != nil {
			return nil, fmt.Errorf("nodesync: release node %s: %w", nodeName, err)
		}
		if done {
			return ids, nil
		}
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("nodesync: release node %s: %w", nodeName, err)
		}
	}
}

// releaseOnce makes one attempt; done is false when something changed
// meanwhile.
func releaseOnce(ctx context.Context, broker ProtoBroker, name string) ([]uint32, bool, error) {
	me := nodeKey(name)
	res, err := broker.Txn(ctx, Txn{Then: []Op{{Type: OpGet, Key: me}}})
	if err != nil {
		return nil, false, err
	}
	if len(res.Results[0]) == 0 {
		return nil, true, nil // nothing to release
	}
	own := res.Results[0][0]
	cond := []Cmp{{Key: me, Target: ModRevision, Revision: own.ModRevision}}
	ops := []Op{{Type: OpDelete, Key: me}}
	free := func(id uint32) {
		ops = append(ops, Op{Type: OpPut, Key: freeKey(id)})
	}
	var released []uint32
	var ticket uint32 // the unclaimed ticket of a pending record
	rec, perr := parseRecord(own.Key, own.Value, own.ModRevision)
	switch {
	case perr == nil && rec.ID > 0:
		res, err := broker.Txn(ctx, Txn{Then: []Op{{Type: OpGet, Key: idKey(rec.ID)}}})
		if err != nil {
			return nil, false, err
		}
		if kvs := res.Results[0]; len(kvs) == 1 {
			if _, owner, err := parseClaim(kvs[0].Key, kvs[0].Value); err == nil && owner == name {
				cond = append(cond, Cmp{Key: idKey(rec.ID), Target: ModRevision, Revision: kvs[0].ModRevision})
				ops = append(ops, Op{Type: OpDelete, Key: idKey(rec.ID)})
				free(rec.ID)
				released = append(released, rec.ID)
			}
		}
	case perr == nil:
		// Pending: give back the ticket taken with the record, if the ID is
		// still unclaimed.
		res, err := broker.Txn(ctx, Txn{Then: []Op{{Type: OpGet, Key: ticketKey, Revision: own.ModRevision}}})
		if err != nil && !errors.Is(err, ErrCompacted) {
			return nil, false, err
		}
		if err == nil && len(res.Results[0]) == 1 && res.Results[0][0].ModRevision == own.ModRevision {
			if t := res.Results[0][0].Version; t > 0 && t <= math.MaxUint32 {
				ticket = uint32(t)
			}
		}
		if ticket != 0 {
			res, err := broker.Txn(ctx, Txn{Then: []Op{{Type: OpGet, Key: idKey(ticket)}}})
			if err != nil {
				return nil, false, err
			}
			if len(res.Results[0]) > 0 {
				ticket = 0 // claimed by another node meanwhile: not ours to free
			}
		}
	}
	if len(released) == 0 {
		// A claim may name this node without the record saying so (left by
		// an older version): read all claims.
		res, err := broker.Txn(ctx, Txn{Then: []Op{{Type: OpGet, Key: idKeyPrefix, Prefix: true}}})
		if err != nil {
			return nil, false, err
		}
		for _, kv := range res.Results[0] {
			id, owner, err := parseClaim(kv.Key, kv.Value)
			if err != nil || owner != name {
				continue
			}
			cond = append(cond, Cmp{Key: kv.Key, Target: ModRevision, Revision: kv.ModRevision})
			ops = append(ops, Op{Type: OpDelete, Key: kv.Key})
			free(id)
			released = append(released, id)
		}
	}
	if ticket != 0 && !slices.Contains(released, ticket) {
		cond = append(cond, Cmp{Key: idKey(ticket), Target: CreateRevision, Revision: 0})
		free(ticket)
	}
	res, err = broker.Txn(ctx, Txn{If: cond, Then: ops})
	if err != nil {
		return nil, false, err
	}
	if !res.Succeeded {
		return nil, false, nil
	}
	slices.Sort(released)
	return released, true, nil
}

// Releaser is a [controller.EventHandler] for the cluster-level event loop
// (of the reflector or an operator, not of the vswitch agents): when a
// Kubernetes node object is deleted (a KubeStateChange of resource "node"
// with a nil NewValue) it calls [ReleaseNode] for that node, bounded by
// Config.RequestTimeout and by the event's context ([controller.ContextOf]). A failed release is returned as the handler's
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
func (r *Releaser) Update(event controller.Event, txn controller.UpdateOperations) (string, error) {
	ev, ok := event.(*controller.KubeStateChange)
	if !ok {
		return "", nil
	}
	name, err := kubemodel.ParseNodeKey(ev.Key)
	if err != nil {
		r.log.Warn("skipping node deletion with malformed key", slog.Any("error", err))
		return "", nil
	}
	ctx, cancel := context.WithTimeout(controller.ContextOf(txn), r.cfg.RequestTimeout)
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
