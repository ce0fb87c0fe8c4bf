package nodesync

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestFreeKey(t *testing.T) {
	tests := []struct {
		key    string
		want   uint32
		wantOK bool
	}{
		{freeKey(1), 1, true},
		{freeKey(4294967295), 4294967295, true},
		{"alloc/free/0000000042", 42, true},
		{"alloc/free/42", 0, false},
		{"alloc/free/0000000000", 0, false},
		{"alloc/free/00000000x1", 0, false},
		{"alloc/free/9999999999", 0, false},
		{"id/0000000001", 0, false},
	}
	for _, tc := range tests {
		got, ok := parseFreeKey(tc.key)
		require.Equal(t, tc.wantOK, ok, tc.key)
		require.Equal(t, tc.want, got, tc.key)
	}
	// Key order is numeric order: the smallest hint comes first in a range.
	require.Less(t, freeKey(9), freeKey(10))
	require.Less(t, freeKey(99999), freeKey(100000))
}

func FuzzFreeKey(f *testing.F) {
	f.Add(uint32(1))
	f.Add(uint32(4294967295))
	f.Fuzz(func(t *testing.T, id uint32) {
		key := freeKey(id)
		got, ok := parseFreeKey(key)
		if id == 0 {
			if ok {
				t.Fatalf("parseFreeKey(%q) accepted ID 0", key)
			}
			return
		}
		if !ok || got != id {
			t.Fatalf("parseFreeKey(freeKey(%d)) = %d, %v", id, got, ok)
		}
		if other := freeKey(id / 2); id/2 > 0 && other >= key {
			t.Fatalf("key order: %q >= %q", other, key)
		}
		_ = strconv.Itoa(int(id))
	})
}
