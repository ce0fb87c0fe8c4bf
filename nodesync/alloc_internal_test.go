package nodesync

import (
	"log/slog"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vswitchkit/vswitchkit/nodesync/model"
	"google.golang.org/protobuf/proto"
)

// naiveCandidate is the oracle: walk 1..maxID, skip `ahead` free IDs.
func naiveCandidate(taken []uint32, ahead int, maxID uint32) (uint32, bool) {
	isTaken := make(map[uint32]bool)
	for _, t := range taken {
		isTaken[t] = true
	}
	var first uint32
	for id := uint32(1); id <= maxID && id != 0; id++ {
		if isTaken[id] {
			continue
		}
		if first == 0 {
			first = id
		}
		if ahead == 0 {
			return id, true
		}
		ahead--
	}
	return first, first != 0
}

func TestCandidate(t *testing.T) {
	tests := []struct {
		name   string
		taken  []uint32
		ahead  int
		max    uint32
		want   uint32
		wantOK bool
	}{
		{"empty cluster, first in queue", nil, 0, 100, 1, true},
		{"empty cluster, third in queue", nil, 2, 100, 3, true},
		{"dense prefix", []uint32{1, 2, 3}, 0, 100, 4, true},
		{"hole is filled first", []uint32{1, 3, 4}, 0, 100, 2, true},
		{"second in queue skips the hole", []uint32{1, 3, 4}, 1, 100, 5, true},
		{"queue beyond max falls back to smallest free", []uint32{1, 3}, 5, 4, 2, true},
		{"all taken", []uint32{1, 2, 3}, 0, 3, 0, false},
		{"taken IDs above max ignored", []uint32{5, 9}, 1, 4, 2, true},
		{"max uint32", []uint32{4294967294}, 0, 4294967295, 1, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := allocState{taken: tc.taken, ahead: tc.ahead}
			got, ok := st.candidate(tc.max)
			require.Equal(t, tc.wantOK, ok)
			require.Equal(t, tc.want, got)
		})
	}
}

// TestCandidateModel compares candidate with the naive oracle on random
// sets of taken IDs.
func TestCandidateModel(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 5000 {
		maxID := uint32(1 + r.IntN(40))
		var taken []uint32
		for id := uint32(1); id <= maxID+5; id++ {
			if r.IntN(3) == 0 {
				taken = append(taken, id)
			}
		}
		ahead := r.IntN(45)
		st := allocState{taken: taken, ahead: ahead}
		got, ok := st.candidate(maxID)
		want, wantOK := naiveCandidate(taken, ahead, maxID)
		require.Equal(t, wantOK, ok, "taken %v ahead %d max %d", taken, ahead, maxID)
		require.Equal(t, want, got, "taken %v ahead %d max %d", taken, ahead, maxID)
	}
}

func FuzzCandidate(f *testing.F) {
	f.Add([]byte{1, 3, 4}, 1, uint32(10))
	f.Add([]byte{}, 0, uint32(1))
	f.Fuzz(func(t *testing.T, raw []byte, ahead int, maxID uint32) {
		maxID = maxID%300 + 1
		if ahead < 0 {
			ahead = -ahead
		}
		ahead %= 400
		var taken []uint32
		for _, b := range raw {
			if b != 0 {
				taken = append(taken, uint32(b))
			}
		}
		slices.Sort(taken)
		taken = slices.Compact(taken)
		st := allocState{taken: taken, ahead: ahead}
		got, ok := st.candidate(maxID)
		want, wantOK := naiveCandidate(taken, ahead, maxID)
		if ok != wantOK || got != want {
			t.Fatalf("candidate(%v, ahead %d, max %d) = %d,%v; want %d,%v", taken, ahead, maxID, got, ok, want, wantOK)
		}
	})
}

func kvOf(t *testing.T, key string, m proto.Message, createRev int64) KV {
	t.Helper()
	b, err := proto.Marshal(m)
	require.NoError(t, err)
	return KV{Key: key, Value: b, CreateRevision: createRev, ModRevision: createRev}
}

// TestScanAllocState checks the queue rank: only pending records created
// before this node's record, whose owner has no claim yet, are ahead.
func TestScanAllocState(t *testing.T) {
	list := ListResult{Revision: 20, KVs: []KV{
		kvOf(t, "id/1", &model.NodeIDClaim{Id: 1, Name: "old"}, 1),
		kvOf(t, "id/2", &model.NodeIDClaim{Id: 2, Name: "claimed-not-recorded"}, 9),
		{Key: "id/7", Value: []byte("junk"), CreateRevision: 3},
		kvOf(t, "node/old", &model.VswitchNode{Id: 1, Name: "old"}, 2),
		kvOf(t, "node/claimed-not-recorded", &model.VswitchNode{Name: "claimed-not-recorded"}, 4),
		kvOf(t, "node/pending-early", &model.VswitchNode{Name: "pending-early"}, 5),
		kvOf(t, "node/me", &model.VswitchNode{Name: "me"}, 6),
		kvOf(t, "node/pending-late", &model.VswitchNode{Name: "pending-late"}, 7),
		{Key: "node/broken", Value: []byte("junk"), CreateRevision: 3},
	}}
	st := scanAllocState(list, "me", slog.New(slog.DiscardHandler))
	require.Equal(t, []uint32{1, 2, 7}, st.taken)
	require.Empty(t, st.mine)
	require.NotNil(t, st.own)
	require.Equal(t, 1, st.ahead, "only pending-early is ahead")
	id, ok := st.candidate(100)
	require.True(t, ok)
	require.Equal(t, uint32(4), id, "3 goes to pending-early")
}
