package bgp

import (
	"errors"
	"slices"
	"strings"
)

// joinSorted joins errs in the order of their messages, so that errors
// gathered from maps read the same on every run.
func joinSorted(errs []error) error {
	slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	return errors.Join(errs...)
}
