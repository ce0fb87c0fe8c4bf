package svcprocessor

import "slices"

// ifSet is a set of interface names with a cached sorted copy. The cached
// slice is never modified once built (a change builds a new one), so it can
// be handed to renderers as an "old" set.
type ifSet struct {
	m     map[string]struct{}
	cache []string // sorted members, built by sorted; stale unless valid
	valid bool     // cache reflects m
}

func (s *ifSet) add(name string) bool {
	if _, ok := s.m[name]; ok {
		return false
	}
	if s.m == nil {
		s.m = make(map[string]struct{})
	}
	s.m[name] = struct{}{}
	s.valid = false
	return true
}

func (s *ifSet) remove(name string) bool {
	if _, ok := s.m[name]; !ok {
		return false
	}
	delete(s.m, name)
	s.valid = false
	return true
}

func (s *ifSet) sorted() []string {
	if s.valid {
		return s.cache
	}
	out := make([]string, 0, len(s.m))
	for k := range s.m {
		out = append(out, k)
	}
	slices.Sort(out)
	s.cache, s.valid = out, true
	return out
}
