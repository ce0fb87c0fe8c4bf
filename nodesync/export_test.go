package nodesync

import "context"

// JoinForTest runs only the ID allocation of Run (no record list, no
// watch), for the join benchmarks.
func (ns *NodeSync) JoinForTest(ctx context.Context) (uint32, error) {
	id, _, err := ns.allocate(ctx)
	return id, err
}

// AppliedRecordChangesForTest returns the number of watched record
// changes the handler has taken so far.
func (ns *NodeSync) AppliedRecordChangesForTest() uint64 { return ns.applied.Load() }
