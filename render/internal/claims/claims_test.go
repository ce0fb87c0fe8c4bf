package claims_test

import (
	"cmp"
	"fmt"
	"testing"

	"github.com/vswitchkit/vswitchkit/render/internal/claims"
)

// owner is a service by name; its values are strings by frontend.
type owner struct {
	name   string
	values map[int]*string
}

func newTable() *claims.Table[int, *owner, *string] {
	return claims.New(func(a, b *owner) int { return cmp.Compare(a.name, b.name) },
		func(o *owner, f int) *string { return o.values[f] })
}

func val(s string) *string { return &s }

func str(p *string) string {
	if p == nil {
		return "-"
	}
	return *p
}

func TestWantDrop(t *testing.T) {
	a := &owner{"a", map[int]*string{1: val("a1")}}
	b := &owner{"b", map[int]*string{1: val("b1")}}
	c := &owner{"c", map[int]*string{1: val("c1")}}
	a2 := &owner{"a", map[int]*string{1: val("a1'")}} // a's new rendering
	tab := newTable()
	for _, tc := range []struct {
		name      string
		do        func() (*string, *string, bool)
		want      string // old -> cur, or "none"
		conflicts int
	}{
		{"b wants a free frontend", func() (*string, *string, bool) { return tab.Want(1, b, nil, b.values[1]) }, "- -> b1", 0},
		{"c comes after b", func() (*string, *string, bool) { return tab.Want(1, c, nil, c.values[1]) }, "none", 1},
		{"a comes first and takes it from b", func() (*string, *string, bool) { return tab.Want(1, a, nil, a.values[1]) }, "b1 -> a1", 1},
		{"c changes its value: not its frontend", func() (*string, *string, bool) { return tab.Want(1, c, c.values[1], val("c1'")) }, "none", 1},
		{"a's new rendering, before Rebind", func() (*string, *string, bool) { return tab.Want(1, a2, a.values[1], a2.values[1]) }, "a1 -> a1'", 1},
		{"the same value again", func() (*string, *string, bool) { return tab.Want(1, a, a.values[1], a.values[1]) }, "none", 1},
		{"c lets go: not its frontend", func() (*string, *string, bool) { return tab.Drop(1, c, c.values[1]) }, "none", 1},
		{"a lets go: b takes it", func() (*string, *string, bool) { return tab.Drop(1, a, a.values[1]) }, "a1 -> b1", 0},
		{"a again: not an owner", func() (*string, *string, bool) { return tab.Drop(1, a, a.values[1]) }, "none", 0},
		{"b lets go: free", func() (*string, *string, bool) { return tab.Drop(1, b, b.values[1]) }, "b1 -> -", 0},
	} {
		old, cur, changed := tc.do()
		got := "none"
		if changed {
			got = str(old) + " -> " + str(cur)
		}
		if got != tc.want || tab.Conflicts() != tc.conflicts {
			t.Errorf("%s: %s, %d conflicts; want %s, %d", tc.name, got, tab.Conflicts(), tc.want, tc.conflicts)
		}
	}
	if tab.Len() != 0 || tab.Owners(1) != nil {
		t.Errorf("left: %d frontends, owners %v", tab.Len(), tab.Owners(1))
	}
}

func TestRebind(t *testing.T) {
	a := &owner{"a", map[int]*string{1: val("a1")}}
	a2 := &owner{"a", map[int]*string{1: val("a1")}}
	tab := newTable()
	tab.Want(1, a, nil, a.values[1])
	tab.Rebind(1, a, a2)
	if got := tab.Owners(1); len(got) != 1 || got[0] != a2 {
		t.Fatalf("owners after Rebind: %v", got)
	}
	if _, _, changed := tab.Drop(1, a, a.values[1]); changed {
		t.Error("the old rendering is no longer an owner")
	}
}

func Example() {
	svcA := &owner{"default/a", map[int]*string{80: val("a's mapping")}}
	svcB := &owner{"default/b", map[int]*string{80: val("b's mapping")}}
	tab := newTable()
	show := func(old, cur *string, changed bool) {
		if changed {
			fmt.Printf("VPP: %s -> %s\n", str(old), str(cur))
		} else {
			fmt.Println("VPP: unchanged")
		}
	}
	show(tab.Want(80, svcB, nil, svcB.values[80]))
	show(tab.Want(80, svcA, nil, svcA.values[80]))
	fmt.Println("conflicts:", tab.Conflicts())
	show(tab.Drop(80, svcA, svcA.values[80]))
	// Output:
	// VPP: - -> b's mapping
	// VPP: b's mapping -> a's mapping
	// conflicts: 1
	// VPP: a's mapping -> b's mapping
}

func TestDiff(t *testing.T) {
	p := func(s string) *string { return &s }
	byValue := func(a, b *string) int { return cmp.Compare(*a, *b) }
	for _, tc := range []struct {
		name     string
		old, cur []*string
		want     []string
	}{
		{"both empty", nil, nil, nil},
		{"all new", nil, []*string{p("a"), p("b")}, []string{"claim -/a", "claim -/b"}},
		{"all gone", []*string{p("a"), p("b")}, nil, []string{"release a", "release b"}},
		{"same", []*string{p("a")}, []*string{p("a")}, []string{"claim a/a"}},
		{"interleaved", []*string{p("a"), p("c"), p("e")}, []*string{p("b"), p("c"), p("f")},
			[]string{"release a", "claim -/b", "claim c/c", "release e", "claim -/f"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			claims.Diff(tc.old, tc.cur, byValue,
				func(v *string) { got = append(got, "release "+*v) },
				func(prev, v *string) {
					from := "-"
					if prev != nil {
						from = *prev
					}
					got = append(got, "claim "+from+"/"+*v)
				})
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}
