// Package cfgutil holds the helpers that the controller packages' Config
// types share to fill in defaults and report bad fields.
package cfgutil

import (
	"fmt"
	"time"
)

// Duration is one duration field of a Config: its name (for errors), a
// pointer to it and its default.
type Duration struct {
	Name    string
	Value   *time.Duration
	Default time.Duration
}

// Durations sets every zero duration to its default and returns an error
// naming each negative one.
func Durations(ds []Duration) []error {
	var errs []error
	for _, d := range ds {
		switch {
		case *d.Value == 0:
			*d.Value = d.Default
		case *d.Value < 0:
			errs = append(errs, fmt.Errorf("%s %v is negative", d.Name, *d.Value))
		}
	}
	return errs
}
