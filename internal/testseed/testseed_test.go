package testseed

import (
	"slices"
	"testing"
)

func TestRunPattern(t *testing.T) {
	for _, tc := range []struct{ name, want string }{
		{"TestA", "^TestA$"},
		{"TestA/sub", "^TestA$/^sub$"},
		{"TestA/a.b(1)", `^TestA$/^a\.b\(1\)$`},
	} {
		if got := RunPattern(tc.name); got != tc.want {
			t.Errorf("RunPattern(%q) = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestSeeds(t *testing.T) {
	for _, tc := range []struct {
		name, env string
		want      []uint64
	}{
		{"defaults", "", []uint64{3, 4}},
		{"given", "9", []uint64{9}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("SEED", tc.env)
			if got := Seeds(t, 3, 4); !slices.Equal(got, tc.want) {
				t.Errorf("Seeds = %v, want %v", got, tc.want)
			}
			if got := slices.Collect(Range(t, 2)); len(tc.env) == 0 && !slices.Equal(got, []uint64{0, 1}) || len(tc.env) > 0 && !slices.Equal(got, tc.want) {
				t.Errorf("Range = %v", got)
			}
			if got := Fixed(t, 5); len(tc.env) == 0 && got != 5 || len(tc.env) > 0 && got != tc.want[0] {
				t.Errorf("Fixed = %d", got)
			}
		})
	}
}
