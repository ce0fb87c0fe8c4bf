package nodesync

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"github.com/cenkalti/backoff/v5"
	"github.com/vswitchkit/vswitchkit/nodesync/nodesyncmodel"
	"google.golang.org/protobuf/proto"
)

// ID allocation
//
// Keys (relative to Config.Prefix):
//
//	node/<name>              the node's record (nodesyncmodel.VswitchNode), ID 0 while pending
//	id/<n>                   the claim of ID n (nodesyncmodel.NodeIDClaim naming the owner)
//	alloc/ticket             the ticket counter: its etcd version counts the tickets handed out
//	alloc/free/<%010d>       a free-ID hint: ID n was released and may be claimed again
//
// Truth and hints. The claim id/<n> is the only truth about who owns ID n:
// it is created with a compare-create (the key must not exist), so two nodes
// can never own the same ID, whatever the hints say. A node owns ID n when
// id/<n> names it; its record node/<name> carries n and is written in the
// same transaction as the claim. The ticket counter and the free-ID hints
// only steer joiners towards the smallest free ID without reading every
// record; a stale hint costs one failed compare and is then removed.
//
// A join costs O(1) requests, each touching O(1) keys, whatever the number
// of nodes:
//
//  1. One transaction: if node/<name> is as expected (absent for a first
//     join) and no free-ID hint exists (a range compare over alloc/free/:
//     "no key has a create revision other than 0"), put alloc/ticket, put
//     node/<name> with ID 0 (pending) and read alloc/ticket back. The
//     ticket t is the counter's version after the put: etcd increments it by
//     one per put, so every ticket is handed out exactly once, and the
//     unconditional put never conflicts with other joiners. Otherwise (the
//     else branch) the same request returns node/<name> and the smallest
//     free-ID hints.
//  2. One transaction claims t: if id/<t> does not exist and node/<name> is
//     still the pending record of step 1 (its mod revision), create id/<t>
//     and write t into node/<name>.
//
// A restarting node reads its record in step 1 (else branch) and the claim
// it names (one more single-key read): if the claim names the node, it
// keeps its ID and writes nothing.
//
// Why the IDs are unique: only a compare-create of id/<n> makes n owned,
// and ReleaseNode deletes a claim only together with its owner's record in
// one transaction, compared against the revisions it read.
//
// Why the IDs are dense (the smallest free ones). Let T be the number of
// tickets handed out. Every ID 1..T is claimed, listed as a free-ID hint
// (ReleaseNode adds the hint in the transaction that deletes the claim), or
// held by a joiner between steps 1 and 2. A ticket is only taken in a
// transaction that sees no hint, so at that moment every ID below T+1 is
// claimed or held: T+1 is the smallest ID not claimed or held. Joiners that
// see hints claim them first, the smallest first (step 1's else branch
// returns them in numeric order; the hint keys are zero-padded). Under
// contention on the same hint, a joiner that lost a race picks at random
// among the first few hints to spread out, so when at least as many nodes
// join as there are hints, all of them are filled.
//
// Failures. Every write is conditional on the revisions read, so a
// repeated attempt after an error with unknown outcome (an etcd request
// that timed out after it was applied) is safe: if step 1 was applied
// unseen, the retry finds the pending record and recovers its ticket by
// reading alloc/ticket at the record's mod revision (the put of step 1 and
// of the ticket share that revision; a one-key historical read); if step 2
// was applied unseen, the retry finds the claimed record. A ticket whose ID
// was claimed meanwhile (a claim left by an older version of this package,
// or taken by a repair below) is dropped and a new one taken. When the
// ticket cannot be recovered (the revision was compacted) or the record
// names an ID that the node does not own, the node scans the claims once
// (O(N), only on this rare path): it takes a claim that names it (left by
// an older version, which wrote the claim before the record) or else the
// smallest ID below T that is neither claimed nor hinted (e.g. its own lost
// ticket), so lost tickets do not leave holes.
//
// A crashed joiner that never comes back holds its ticket until
// ReleaseNode is called for it; ReleaseNode turns the ticket into a hint.

const (
	ticketKey     = "alloc/ticket"
	freeKeyPrefix = "alloc/free/"
	// freeWindow is how many free-ID hints one read returns.
	freeWindow = 16
)

func freeKey(id uint32) string { return fmt.Sprintf("%s%010d", freeKeyPrefix, id) }

func parseFreeKey(key string) (uint32, bool) {
	s, ok := strings.CutPrefix(key, freeKeyPrefix)
	if !ok || len(s) != 10 {
		return 0, false
	}
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil || n == 0 {
		return 0, false
	}
	return uint32(n), true
}

// errRetry marks an allocation step that must be retried after a backoff
// (a DB error); races are retried at once.
var errRetry = errors.New("retry")

// allocation is the state of one node's ID allocation. It is owned by the
// Run goroutine.
type allocation struct {
	ns *NodeSync
	// expect is the ModRevision node/<name> is expected to have: 0 means
	// absent. Every conditional write compares against it.
	expect int64
	// skip is the ModRevision of an own record whose ticket or ID has been
	// tried already (the ticket's ID was claimed by another node, or the
	// claims were scanned): it is not tried again, and a new ticket may
	// replace it. 0 (no record) at first.
	skip int64
	// retry is a claim whose last attempt failed with an unknown outcome;
	// it is repeated as it was (same ID, same expected record) so that a
	// ticket is never abandoned.
	retry     *claimAttempt
	conflicts int    // lost races for free-ID hints
	pending   []byte // the encoded pending record
}

// claimAttempt is one claim of an ID.
type claimAttempt struct {
	id   uint32
	kind claimKind
	hint *KV // the free-ID hint claimed, for kind hintClaim
}

type claimKind int

const (
	ticketClaim claimKind = iota // the ID of a ticket
	hintClaim                    // the ID of a free-ID hint
	holeClaim                    // a hole found by repair
)

// outcome is the result of a claim transaction.
type outcome int

const (
	claimed       outcome = iota // the ID is this node's now
	recordChanged                // this node's record changed meanwhile
	idTaken                      // another node owns the ID
	hintGone                     // the hint was taken by another joiner
)

// allocate claims this node's ID, or finds the one it owns already, and
// returns it with this node's record as stored.
func (ns *NodeSync) allocate(ctx context.Context) (uint32, vswitchRecord, error) {
	pending, err := proto.Marshal(&nodesyncmodel.VswitchNode{Name: ns.name})
	if err != nil {
		return 0, vswitchRecord{}, fmt.Errorf("nodesync: encode node record: %w", err)
	}
	a := &allocation{ns: ns, pending: pending}
	type result struct {
		id  uint32
		rec vswitchRecord
	}
	r, err := retryDB(ctx, ns, "allocating the node ID", func() (result, error) {
		for {
			if err := ctx.Err(); err != nil {
				return result{}, backoff.Permanent(err)
			}
			id, rec, done, err := a.step(ctx)
			switch {
			case errors.Is(err, errRetry):
				ns.setDBError(err)
				return result{}, err
			case err != nil:
				return result{}, backoff.Permanent(err)
			case done:
				return result{id, rec}, nil
			}
		}
	})
	return r.id, r.rec, err
}

// step makes one attempt: it returns done with the ID, or not done after a
// lost race (retry at once), or an error wrapping errRetry after a DB error
// (retry after a backoff), or another error (give up).
func (a *allocation) step(ctx context.Context) (uint32, vswitchRecord, bool, error) {
	if r := a.retry; r != nil {
		return a.try(ctx, *r)
	}
	ns := a.ns
	me := nodeKey(ns.name)
	// A new ticket is taken only over a record state that holds nothing to
	// recover: no record (skip 0) or one given up (a dead ticket, a
	// malformed record, a scan without result). A pending record's ticket
	// must be recovered, never replaced, or its ID would stay a hole.
	res, err := ns.txn(ctx, Txn{
		If: []Cmp{
			{Key: me, Target: ModRevision, Revision: a.skip},
			{Key: freeKeyPrefix, Prefix: true, Target: CreateRevision, Revision: 0},
		},
		Then: []Op{
			{Type: OpPut, Key: ticketKey},
			{Type: OpPut, Key: me, Value: a.pending},
			{Type: OpGet, Key: ticketKey},
		},
		Else: []Op{
			{Type: OpGet, Key: me},
			{Type: OpGet, Key: freeKeyPrefix, Prefix: true, Limit: freeWindow},
		},
	})
	if err != nil {
		return 0, vswitchRecord{}, false, fmt.Errorf("%w: take a ticket: %w", errRetry, err)
	}
	if res.Succeeded {
		a.expect = res.Revision
		if len(res.Results[2]) != 1 {
			return 0, vswitchRecord{}, false, fmt.Errorf("%w: ticket counter missing after its put", errRetry)
		}
		t := res.Results[2][0].Version
		if t > int64(ns.cfg.MaxNodeID) {
			return 0, vswitchRecord{}, false, fmt.Errorf("%w: ticket %d is above the largest node ID %d", ErrNoFreeID, t, ns.cfg.MaxNodeID)
		}
		return a.try(ctx, claimAttempt{id: uint32(t), kind: ticketClaim})
	}

	var own *KV
	a.expect = 0
	if kvs := res.Results[0]; len(kvs) == 1 {
		own = &kvs[0]
		a.expect = own.ModRevision
	} else {
		a.skip = 0 // no record (e.g. released meanwhile): nothing to recover
	}
	if own != nil && own.ModRevision != a.skip {
		rec, perr := parseRecord(own.Key, own.Value, own.ModRevision)
		switch {
		case perr != nil:
			ns.log.Warn("own node record is malformed; claiming an ID anew", slog.Any("error", perr))
			a.skip = own.ModRevision
		case rec.ID > 0:
			owner, err := ns.claimOwner(ctx, rec.ID)
			if err != nil {
				return 0, vswitchRecord{}, false, err
			}
			if owner == ns.name {
				return rec.ID, rec, true, nil // restart: keep the ID
			}
			ns.log.Warn("own node record names an ID this node does not own", slog.Uint64("id", uint64(rec.ID)), slog.String("owner", owner))
			return a.repair(ctx)
		default:
			// Pending: step 1 was applied but its answer lost, or the node
			// crashed before step 2. The ticket put shares the record's
			// revision.
			t, ok, err := a.recoverTicket(ctx, own.ModRevision)
			if err != nil {
				return 0, vswitchRecord{}, false, err
			}
			if !ok {
				return a.repair(ctx)
			}
			if t > int64(ns.cfg.MaxNodeID) {
				return 0, vswitchRecord{}, false, fmt.Errorf("%w: ticket %d is above the largest node ID %d", ErrNoFreeID, t, ns.cfg.MaxNodeID)
			}
			return a.try(ctx, claimAttempt{id: uint32(t), kind: ticketClaim})
		}
	}
	return a.claimHint(ctx, res.Results[1])
}

// try makes one claim attempt and acts on its outcome.
func (a *allocation) try(ctx context.Context, c claimAttempt) (uint32, vswitchRecord, bool, error) {
	ns := a.ns
	before := a.expect
	o, err := a.commit(ctx, c)
	if err != nil {
		a.retry = &c
		return 0, vswitchRecord{}, false, err
	}
	a.retry = nil
	switch o {
	case claimed:
		return c.id, ns.claimedRecord(c.id), true, nil
	case recordChanged:
		ns.log.Debug("own record changed while claiming an ID; starting over", slog.Uint64("id", uint64(c.id)))
	case idTaken:
		switch c.kind {
		case ticketClaim:
			// Never try this ticket again.
			ns.log.Debug("ticket's ID is taken, taking another", slog.Uint64("id", uint64(c.id)))
			a.skip = before
		case hintClaim:
			if err := ns.removeHint(ctx, *c.hint); err != nil {
				return 0, vswitchRecord{}, false, err
			}
		}
	case hintGone:
		a.conflicts++
		ns.log.Debug("lost the race for a free ID", slog.Uint64("id", uint64(c.id)), slog.Int("conflicts", a.conflicts))
	}
	return 0, vswitchRecord{}, false, nil
}

// commit creates the claim of c.id and writes the ID into this node's
// record, if the record is still as expected and the ID unclaimed (and the
// hint, if any, unchanged). It updates a.expect to the record's revision.
func (a *allocation) commit(ctx context.Context, c claimAttempt) (outcome, error) {
	ns := a.ns
	me := nodeKey(ns.name)
	claim, err := proto.Marshal(&nodesyncmodel.NodeIDClaim{Id: c.id, Name: ns.name})
	if err != nil {
		return 0, fmt.Errorf("nodesync: encode ID claim: %w", err)
	}
	rec, err := proto.Marshal(recordToModel(ns.claimedRecord(c.id)))
	if err != nil {
		return 0, fmt.Errorf("nodesync: encode node record: %w", err)
	}
	txn := Txn{
		If: []Cmp{
			{Key: idKey(c.id), Target: CreateRevision, Revision: 0},
			{Key: me, Target: ModRevision, Revision: a.expect},
		},
		Then: []Op{
			{Type: OpPut, Key: idKey(c.id), Value: claim},
			{Type: OpPut, Key: me, Value: rec},
		},
		Else: []Op{{Type: OpGet, Key: me}, {Type: OpGet, Key: idKey(c.id)}},
	}
	if c.hint != nil {
		txn.If = append(txn.If, Cmp{Key: c.hint.Key, Target: ModRevision, Revision: c.hint.ModRevision})
		txn.Then = append(txn.Then, Op{Type: OpDelete, Key: c.hint.Key})
	}
	res, err := ns.txn(ctx, txn)
	if err != nil {
		return 0, fmt.Errorf("%w: claim ID %d: %w", errRetry, c.id, err)
	}
	if res.Succeeded {
		return claimed, nil
	}
	var own, cl *KV
	if kvs := res.Results[0]; len(kvs) == 1 {
		own = &kvs[0]
	}
	if kvs := res.Results[1]; len(kvs) == 1 {
		cl = &kvs[0]
	}
	if own != nil && cl != nil {
		// An earlier attempt whose answer was lost may have succeeded.
		rec, rerr := parseRecord(own.Key, own.Value, own.ModRevision)
		_, name, cerr := parseClaim(cl.Key, cl.Value)
		if rerr == nil && cerr == nil && rec.ID == c.id && name == ns.name {
			a.expect = own.ModRevision
			return claimed, nil
		}
	}
	var cur int64
	if own != nil {
		cur = own.ModRevision
	}
	changed := cur != a.expect
	a.expect = cur
	switch {
	case changed:
		return recordChanged, nil
	case cl != nil:
		return idTaken, nil
	}
	return hintGone, nil
}

// claimHint claims one of the free-ID hints (sorted by ID).
func (a *allocation) claimHint(ctx context.Context, hints []KV) (uint32, vswitchRecord, bool, error) {
	ns := a.ns
	var valid []KV
	for _, h := range hints {
		if _, ok := parseFreeKey(h.Key); ok {
			valid = append(valid, h)
			continue
		}
		// A malformed hint would block tickets forever: remove it.
		ns.log.Warn("removing malformed free-ID hint", slog.String("key", h.Key))
		if err := ns.removeHint(ctx, h); err != nil {
			return 0, vswitchRecord{}, false, err
		}
	}
	if len(valid) == 0 {
		return 0, vswitchRecord{}, false, nil // no hint (any more): the next step takes a ticket
	}
	i := 0
	if a.conflicts > 0 {
		i = rand.IntN(min(len(valid), a.conflicts+1))
	}
	h := valid[i]
	id, _ := parseFreeKey(h.Key)
	if id > ns.cfg.MaxNodeID {
		if i > 0 {
			return 0, vswitchRecord{}, false, nil // try a smaller one
		}
		// Hints are below every ticket, so no larger ID is free either.
		return 0, vswitchRecord{}, false, fmt.Errorf("%w: the smallest free ID %d is above the largest node ID %d", ErrNoFreeID, id, ns.cfg.MaxNodeID)
	}
	return a.try(ctx, claimAttempt{id: id, kind: hintClaim, hint: &h})
}

// removeHint deletes a free-ID hint unless it changed since it was read.
func (ns *NodeSync) removeHint(ctx context.Context, h KV) error {
	_, err := ns.txn(ctx, Txn{
		If:   []Cmp{{Key: h.Key, Target: ModRevision, Revision: h.ModRevision}},
		Then: []Op{{Type: OpDelete, Key: h.Key}},
	})
	if err != nil {
		return fmt.Errorf("%w: remove free-ID hint %s: %w", errRetry, h.Key, err)
	}
	return nil
}

// recoverTicket reads the ticket counter at revision rev: if the counter
// was written in that revision (by the same transaction as the pending
// record), its version is the ticket.
func (a *allocation) recoverTicket(ctx context.Context, rev int64) (int64, bool, error) {
	res, err := a.ns.txn(ctx, Txn{Then: []Op{{Type: OpGet, Key: ticketKey, Revision: rev}}})
	if errors.Is(err, ErrCompacted) {
		a.ns.log.Debug("pending record's ticket is compacted away", slog.Int64("revision", rev))
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("%w: recover ticket: %w", errRetry, err)
	}
	if kvs := res.Results[0]; len(kvs) == 1 && kvs[0].ModRevision == rev {
		return kvs[0].Version, true, nil
	}
	return 0, false, nil
}

// repair is the rare path that reads all claims (O(N)): it takes a claim
// that names this node (left by an older version), or else claims the
// smallest ID up to the ticket count that is neither claimed nor hinted,
// or else falls back to a new ticket or hint.
func (a *allocation) repair(ctx context.Context) (uint32, vswitchRecord, bool, error) {
	ns := a.ns
	res, err := ns.txn(ctx, Txn{Then: []Op{
		{Type: OpGet, Key: idKeyPrefix, Prefix: true},
		{Type: OpGet, Key: freeKeyPrefix, Prefix: true},
		{Type: OpGet, Key: ticketKey},
		{Type: OpGet, Key: nodeKey(ns.name)},
	}})
	if err != nil {
		return 0, vswitchRecord{}, false, fmt.Errorf("%w: read all claims: %w", errRetry, err)
	}
	if kvs := res.Results[3]; len(kvs) == 1 {
		a.expect = kvs[0].ModRevision
	} else {
		a.expect = 0
	}
	taken := make(map[uint32]bool)
	var mine []uint32
	for _, kv := range res.Results[0] {
		id, name, err := parseClaim(kv.Key, kv.Value)
		if id != 0 {
			taken[id] = true // a malformed claim still takes its ID
		}
		if err == nil && name == ns.name {
			mine = append(mine, id)
		}
	}
	if len(mine) > 0 {
		slices.Sort(mine)
		id := mine[0]
		if err := a.writeRecord(ctx, id); err != nil {
			return 0, vswitchRecord{}, false, err
		}
		ns.log.Info("found this node's claim by scanning", slog.Uint64("id", uint64(id)))
		return id, ns.claimedRecord(id), true, nil
	}
	for _, kv := range res.Results[1] {
		if id, ok := parseFreeKey(kv.Key); ok {
			taken[id] = true
		}
	}
	var tickets int64
	if kvs := res.Results[2]; len(kvs) == 1 {
		tickets = kvs[0].Version
	}
	a.skip = a.expect // do not scan again for this record
	for id := int64(1); id <= min(tickets, int64(ns.cfg.MaxNodeID)); id++ {
		if !taken[uint32(id)] {
			ns.log.Info("claiming an ID no node holds", slog.Int64("id", id))
			return a.try(ctx, claimAttempt{id: uint32(id), kind: holeClaim})
		}
	}
	return 0, vswitchRecord{}, false, nil
}

// writeRecord writes id into this node's record if the record is still as
// expected.
func (a *allocation) writeRecord(ctx context.Context, id uint32) error {
	ns := a.ns
	rec, err := proto.Marshal(recordToModel(ns.claimedRecord(id)))
	if err != nil {
		return fmt.Errorf("nodesync: encode node record: %w", err)
	}
	res, err := ns.txn(ctx, Txn{
		If:   []Cmp{{Key: nodeKey(ns.name), Target: ModRevision, Revision: a.expect}},
		Then: []Op{{Type: OpPut, Key: nodeKey(ns.name), Value: rec}},
	})
	if err != nil {
		return fmt.Errorf("%w: write node record: %w", errRetry, err)
	}
	if !res.Succeeded {
		return fmt.Errorf("%w: own record changed while writing it", errRetry)
	}
	return nil
}

// claimedRecord is this node's record with ID id as a claim writes it:
// with the addresses of Config.InitialNodeIPs, if set and valid.
func (ns *NodeSync) claimedRecord(id uint32) vswitchRecord {
	rec := vswitchRecord{ID: id, Name: ns.name}
	if ns.cfg.InitialNodeIPs == nil {
		return rec
	}
	ips, err := ns.cfg.InitialNodeIPs(id)
	if err == nil {
		for _, a := range ips {
			if err = a.Validate(); err != nil {
				break
			}
		}
	}
	if err != nil {
		ns.log.Warn("cannot write the node's addresses with its ID; PublishNodeIPs will", slog.Uint64("id", uint64(id)), slog.Any("error", err))
		return rec
	}
	rec.IPs = ips.Canonical()
	return rec
}

// claimOwner returns the name in the claim of id, "" if there is none, and
// "?" if the claim is malformed.
func (ns *NodeSync) claimOwner(ctx context.Context, id uint32) (string, error) {
	res, err := ns.txn(ctx, Txn{Then: []Op{{Type: OpGet, Key: idKey(id)}}})
	if err != nil {
		return "", fmt.Errorf("%w: read claim of ID %d: %w", errRetry, id, err)
	}
	kvs := res.Results[0]
	if len(kvs) == 0 {
		return "", nil
	}
	_, name, err := parseClaim(kvs[0].Key, kvs[0].Value)
	if err != nil {
		return "?", nil
	}
	return name, nil
}

// txn runs one transaction bounded by Config.RequestTimeout.
func (ns *NodeSync) txn(ctx context.Context, txn Txn) (TxnResult, error) {
	tctx, cancel := context.WithTimeout(ctx, ns.cfg.RequestTimeout)
	defer cancel()
	return ns.broker.Txn(tctx, txn)
}
