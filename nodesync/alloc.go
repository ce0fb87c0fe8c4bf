package nodesync

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/vswitchkit/vswitchkit/nodesync/model"
	"google.golang.org/protobuf/proto"
)

// ID allocation
//
// Every joining node first creates its record node/<name> with ID 0 (a
// compare-create, so a restarting node keeps its old record and its place).
// The create revisions of the pending records order the joiners like a
// queue. A node then reads the whole nodesync prefix in one consistent
// snapshot: the claims id/<n> (taken IDs and their owners) and the records.
// If a claim names this node, the node reuses that ID. Otherwise it counts
// the pending records created before its own (records with ID 0 whose name
// owns no claim) - its rank r - and claims the (r+1)-th smallest free ID
// with a compare-create of id/<n>. Because every joiner that is ahead in the
// queue is either still pending or has already claimed, all joiners compute
// the same assignment from their snapshots and hundreds of simultaneous joins
// claim distinct IDs without conflicts; when all of them are done, the taken
// IDs are the smallest possible (1..N on an empty cluster). A lost race (an
// ID freed or a claim made between snapshots) only costs a re-read and
// another compare-create; attempts are bounded by the context only. Finally
// the node writes its ID into its record.

// allocState is what one snapshot tells a joining node.
type allocState struct {
	taken   []uint32 // sorted, unique
	mine    []uint32 // IDs claimed by this node, sorted
	own     *KV      // this node's record, nil if missing
	ownRec  vswitchRecord
	ahead   int // pending joiners queued before this node
	records []KV
}

func scanAllocState(list ListResult, me string, log *slog.Logger) allocState {
	var st allocState
	claimed := make(map[string]bool)
	for _, kv := range list.KVs {
		if !strings.HasPrefix(kv.Key, idKeyPrefix) {
			continue
		}
		id, name, err := parseClaim(kv.Key, kv.Value)
		if id != 0 {
			// A malformed claim with a valid ID key still takes the ID:
			// handing it out again could duplicate an ID.
			st.taken = append(st.taken, id)
		}
		if err != nil {
			log.Debug("skipping malformed ID claim", slog.Any("error", err))
			continue
		}
		claimed[name] = true
		if name == me {
			st.mine = append(st.mine, id)
		}
	}
	slices.Sort(st.taken)
	st.taken = slices.Compact(st.taken)
	slices.Sort(st.mine)

	type pending struct {
		rev  int64
		name string
	}
	var queue []pending
	for i := range list.KVs {
		kv := list.KVs[i]
		if !strings.HasPrefix(kv.Key, nodeKeyPrefix) {
			continue
		}
		st.records = append(st.records, kv)
		rec, err := parseRecord(kv.Key, kv.Value, kv.ModRevision)
		if rec.Name == me || (err != nil && kv.Key == nodeKey(me)) {
			st.own = &list.KVs[i]
			st.ownRec = rec
			st.ownRec.Name = me
			continue
		}
		if err != nil {
			log.Debug("skipping malformed node record", slog.Any("error", err))
			continue
		}
		if rec.ID == 0 && !claimed[rec.Name] {
			queue = append(queue, pending{kv.CreateRevision, rec.Name})
		}
	}
	if st.own != nil {
		for _, p := range queue {
			if p.rev < st.own.CreateRevision || (p.rev == st.own.CreateRevision && p.name < me) {
				st.ahead++
			}
		}
	}
	return st
}

// candidate returns the ID to claim: the (ahead+1)-th smallest free ID, or
// the smallest free ID if that one is above maxID.
func (st *allocState) candidate(maxID uint32) (uint32, bool) {
	skip := uint64(st.ahead) // free IDs to leave to the joiners ahead
	limit := uint64(maxID)
	var first, prev uint64 // prev: the last taken ID passed
	for i := 0; i <= len(st.taken); i++ {
		end := limit // last ID of the gap after prev
		if i < len(st.taken) && uint64(st.taken[i])-1 < limit {
			end = uint64(st.taken[i]) - 1
		}
		if end > prev {
			size := end - prev
			if first == 0 {
				first = prev + 1
			}
			if skip < size {
				return uint32(prev + 1 + skip), true
			}
			skip -= size
		}
		if end == limit {
			break
		}
		prev = uint64(st.taken[i])
	}
	if first != 0 {
		return uint32(first), true
	}
	return 0, false
}

// allocate claims this node's ID (or finds the one it already owns), writes
// it into the node record and returns it with a snapshot of the node records
// that already includes that write.
func (ns *NodeSync) allocate(ctx context.Context) (uint32, ListResult, error) {
	bo := backoff{base: ns.cfg.RetryBackoff}
	pendingValue, err := proto.Marshal(&model.VswitchNode{Name: ns.name})
	if err != nil {
		return 0, ListResult{}, fmt.Errorf("nodesync: encode node record: %w", err)
	}
	needPending := true
	conflicts := 0
	for {
		if err := ctx.Err(); err != nil {
			return 0, ListResult{}, err
		}
		if needPending {
			if _, err := ns.db.PutIfNotExists(ns.cfg.Prefix+nodeKey(ns.name), pendingValue); err != nil {
				ns.log.Warn("creating node record failed, retrying", slog.Any("error", err))
				if err := bo.wait(ctx); err != nil {
					return 0, ListResult{}, err
				}
				continue
			}
			needPending = false
		}
		lctx, cancel := context.WithTimeout(ctx, ns.cfg.RequestTimeout)
		list, err := ns.broker.List(lctx, "")
		cancel()
		if err != nil {
			ns.log.Warn("reading node IDs failed, retrying", slog.Any("error", err))
			if err := bo.wait(ctx); err != nil {
				return 0, ListResult{}, err
			}
			continue
		}
		st := scanAllocState(list, ns.name, ns.log)
		if len(st.mine) > 0 {
			return ns.finishAllocation(ctx, st.mine[0], st, list.Revision)
		}
		if st.own == nil { // deleted meanwhile (e.g. released): queue again
			needPending = true
			continue
		}
		id, ok := st.candidate(ns.cfg.MaxNodeID)
		if !ok {
			return 0, ListResult{}, fmt.Errorf("%w: all IDs 1..%d are taken", ErrNoFreeID, ns.cfg.MaxNodeID)
		}
		claim, err := proto.Marshal(&model.NodeIDClaim{Id: id, Name: ns.name})
		if err != nil {
			return 0, ListResult{}, fmt.Errorf("nodesync: encode ID claim: %w", err)
		}
		won, err := ns.db.PutIfNotExists(ns.cfg.Prefix+idKey(id), claim)
		if err != nil {
			// The claim may or may not have been made; the next snapshot tells.
			ns.log.Warn("claiming node ID failed, retrying", slog.Uint64("id", uint64(id)), slog.Any("error", err))
			if err := bo.wait(ctx); err != nil {
				return 0, ListResult{}, err
			}
			continue
		}
		if !won {
			conflicts++
			ns.log.Debug("lost node ID race", slog.Uint64("id", uint64(id)), slog.Int("conflicts", conflicts))
			if conflicts > 3 {
				// Spread out nodes that keep colliding (e.g. all falling back
				// to the same smallest free ID).
				if err := sleepCtx(ctx, time.Duration(rand.Int64N(int64(time.Millisecond)*int64(min(conflicts, 50))))); err != nil {
					return 0, ListResult{}, err
				}
			}
			continue
		}
		st.mine = []uint32{id}
		return ns.finishAllocation(ctx, id, st, list.Revision)
	}
}

// finishAllocation writes id into this node's record (unless it is there
// already) and returns the record snapshot including that write.
func (ns *NodeSync) finishAllocation(ctx context.Context, id uint32, st allocState, rev int64) (uint32, ListResult, error) {
	for _, extra := range st.mine {
		if extra == id {
			continue
		}
		// A retried claim whose first attempt had succeeded unnoticed: give
		// the extra ID back. Only this node can own a claim naming it.
		dctx, cancel := context.WithTimeout(ctx, ns.cfg.RequestTimeout)
		_, err := ns.broker.Delete(dctx, idKey(extra), 0)
		cancel()
		if err != nil {
			ns.log.Warn("releasing extra node ID failed", slog.Uint64("id", uint64(extra)), slog.Any("error", err))
		}
	}
	rec := st.ownRec
	rec.Name = ns.name
	rec.ID = id
	records := ListResult{Revision: rev, KVs: st.records}
	if st.own != nil && st.ownRec.ID == id {
		return id, records, nil
	}
	value, err := proto.Marshal(recordToModel(rec))
	if err != nil {
		return 0, ListResult{}, fmt.Errorf("nodesync: encode node record: %w", err)
	}
	bo := backoff{base: ns.cfg.RetryBackoff}
	for {
		pctx, cancel := context.WithTimeout(ctx, ns.cfg.RequestTimeout)
		wrev, err := ns.broker.Put(pctx, nodeKey(ns.name), recordToModel(rec))
		cancel()
		if err == nil {
			own := KV{Key: nodeKey(ns.name), Value: value, ModRevision: wrev, CreateRevision: wrev}
			if st.own != nil {
				own.CreateRevision = st.own.CreateRevision
			}
			kvs := slices.DeleteFunc(slices.Clone(st.records), func(kv KV) bool { return kv.Key == own.Key })
			records.KVs = append(kvs, own)
			return id, records, nil
		}
		ns.log.Warn("writing node record failed, retrying", slog.Any("error", err))
		if err := bo.wait(ctx); err != nil {
			return 0, ListResult{}, err
		}
	}
}

// backoff is a jittered exponential delay, capped at 2s.
type backoff struct {
	base, cur time.Duration
}

func (b *backoff) wait(ctx context.Context) error {
	if b.cur == 0 {
		b.cur = b.base
	}
	d := b.cur/2 + time.Duration(rand.Int64N(int64(b.cur/2)+1))
	b.cur = min(2*b.cur, 2*time.Second)
	return sleepCtx(ctx, d)
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
