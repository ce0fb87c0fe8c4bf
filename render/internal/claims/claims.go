// Package claims is the frontend ownership the service renderers share
// (render/svcnat's NAT44 mappings, render/svccnat's cnat translations):
// several owners — services, pods with hostPorts — may want the same
// frontend (protocol, address, port), which VPP holds once. The owners
// that want a frontend are kept in a fixed order (by namespace and name);
// the first has it, and when it lets go the next one takes it. A Table
// answers, for each change of what an owner wants, which value VPP must
// hold for the frontend instead of which; the renderer writes it.
package claims

import (
	"iter"
	"slices"
)

// Table records, for each frontend F, the owners O that want it and the
// value V each wants for it (V's zero value: none). O and V are pointers
// in practice. A Table is not safe for concurrent use.
type Table[F comparable, O comparable, V comparable] struct {
	owners    map[F][]O
	cmp       func(a, b O) int
	value     func(o O, f F) V
	conflicts int
}

// New returns an empty table: cmp orders the owners of a frontend (the
// first has it), value returns an owner's value for a frontend it wants.
func New[F comparable, O comparable, V comparable](cmp func(a, b O) int, value func(o O, f F) V) *Table[F, O, V] {
	return &Table[F, O, V]{owners: map[F][]O{}, cmp: cmp, value: value}
}

// Want records that o wants v for f; prev is o's value for f so far (zero
// when o did not want f; o may then be a new rendering of the owner that
// the table still knows by its previous one, compared with cmp, until
// Rebind). It returns the change of the value VPP holds
// for f: from old to cur (old zero: f was free; changed false: o does not
// have f, or has it with the same value).
func (t *Table[F, O, V]) Want(f F, o O, prev, v V) (old, cur V, changed bool) {
	var zero V
	owners := t.owners[f]
	if prev != zero {
		if len(owners) == 0 || t.cmp(owners[0], o) != 0 || prev == v {
			return zero, zero, false
		}
		return prev, v, true
	}
	k, _ := slices.BinarySearchFunc(owners, o, t.cmp)
	owners = slices.Insert(owners, k, o)
	t.owners[f] = owners
	if len(owners) == 2 {
		t.conflicts++
	}
	if k != 0 {
		return zero, zero, false // another owner has it
	}
	if len(owners) > 1 { // o takes it from the owner that had it
		return t.value(owners[1], f), v, true
	}
	return zero, v, true
}

// Drop records that o no longer wants f, whose value for o was v. It
// returns the change of the value VPP holds for f: from v to the next
// owner's (cur zero: f is free now); changed false when o did not have f.
func (t *Table[F, O, V]) Drop(f F, o O, v V) (old, cur V, changed bool) {
	var zero V
	owners := t.owners[f]
	k := slices.Index(owners, o)
	if k < 0 {
		return zero, zero, false
	}
	owners = slices.Delete(owners, k, k+1)
	if len(owners) == 1 {
		t.conflicts--
	}
	if len(owners) == 0 {
		delete(t.owners, f)
	} else {
		t.owners[f] = owners
	}
	if k != 0 {
		return zero, zero, false
	}
	if len(owners) > 0 {
		return v, t.value(owners[0], f), true
	}
	return v, zero, true
}

// Rebind puts cur in old's place among the owners of f (the same owner's
// new rendering, which wants f with the same value).
func (t *Table[F, O, V]) Rebind(f F, old, cur O) {
	if k := slices.Index(t.owners[f], old); k >= 0 {
		t.owners[f][k] = cur
	}
}

// Owners returns the owners that want f, the first has it (nil: none).
// The slice is the table's: do not modify it.
func (t *Table[F, O, V]) Owners(f F) []O { return t.owners[f] }

// Conflicts returns the number of frontends more than one owner wants.
func (t *Table[F, O, V]) Conflicts() int { return t.conflicts }

// Len returns the number of frontends some owner wants.
func (t *Table[F, O, V]) Len() int { return len(t.owners) }

// All yields every frontend some owner wants with its owners (in no
// particular order of frontends).
func (t *Table[F, O, V]) All() iter.Seq2[F, []O] {
	return func(yield func(F, []O) bool) {
		for f, owners := range t.owners {
			if !yield(f, owners) {
				return
			}
		}
	}
}

// Diff walks old and cur, an owner's values before and after a change,
// both sorted by cmp (by frontend), in order: release for each value only
// in old, claim for each value of cur with its equal in old (prev: the
// zero T when cur's frontend is new).
func Diff[T any](old, cur []T, cmp func(a, b T) int, release func(T), claim func(prev, t T)) {
	var zero T
	i, j := 0, 0
	for i < len(old) || j < len(cur) {
		switch {
		case j == len(cur) || (i < len(old) && cmp(old[i], cur[j]) < 0):
			release(old[i])
			i++
		case i == len(old) || cmp(old[i], cur[j]) > 0:
			claim(zero, cur[j])
			j++
		default:
			claim(old[i], cur[j])
			i++
			j++
		}
	}
}
