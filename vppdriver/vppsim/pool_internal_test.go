package vppsim

import "testing"

// FuzzIndexPool: the pool never hands out an index in use, hands out the
// index freed last first, and new indexes in order (VPP's pools, as
// 10-acl.json and 11-cnat.json show).
func FuzzIndexPool(f *testing.F) {
	f.Add([]byte{0, 0, 0, 1, 0, 0})
	f.Add([]byte{0, 0, 0, 0, 0, 0, 1, 2, 1, 4})
	f.Fuzz(func(t *testing.T, ops []byte) {
		var p indexPool
		live := map[uint32]bool{}
		var order []uint32 // live indexes in allocation order
		var lastFreed []uint32
		for _, op := range ops {
			if op%2 == 0 || len(order) == 0 {
				i := p.get()
				if live[i] {
					t.Fatalf("index %d handed out twice", i)
				}
				if n := len(lastFreed); n > 0 {
					if i != lastFreed[n-1] {
						t.Fatalf("got %d, want the index freed last (%d)", i, lastFreed[n-1])
					}
					lastFreed = lastFreed[:n-1]
				} else if i != uint32(len(live)) {
					t.Fatalf("got %d, want the next new index %d", i, len(live))
				}
				live[i] = true
				order = append(order, i)
				continue
			}
			k := int(op/2) % len(order)
			i := order[k]
			order = append(order[:k], order[k+1:]...)
			delete(live, i)
			p.put(i)
			lastFreed = append(lastFreed, i)
		}
	})
}
