// Package cfgutil holds the helpers that every package's Config type uses
// to fill in defaults and report bad fields, so that one rule holds
// everywhere (CONTRIBUTING.md, R7): zero means the documented default; a
// negative value means "off" only for fields that say so, and is an error
// for the others.
package cfgutil

import (
	"fmt"
	"time"
)

// Duration is one duration field of a Config: its name (for errors), a
// pointer to it, its default and whether a negative value means "off".
type Duration struct {
	Name    string
	Value   *time.Duration
	Default time.Duration
	// Off: a negative value is kept (the field's doc says what "off"
	// means for it: never, none, no limit) instead of being an error.
	Off bool
}

// Durations sets every zero duration to its default and returns an error
// naming each negative one that may not be off.
func Durations(ds []Duration) []error {
	var errs []error
	for _, d := range ds {
		switch {
		case *d.Value == 0:
			*d.Value = d.Default
		case *d.Value < 0 && !d.Off:
			errs = append(errs, fmt.Errorf("%s %v is negative", d.Name, *d.Value))
		}
	}
	return errs
}

// Int is one integer field of a Config, with the same rules as Duration.
type Int struct {
	Name    string
	Value   *int
	Default int
	Off     bool
}

// Ints sets every zero integer to its default and returns an error naming
// each negative one that may not be off.
func Ints(is []Int) []error {
	var errs []error
	for _, i := range is {
		switch {
		case *i.Value == 0:
			*i.Value = i.Default
		case *i.Value < 0 && !i.Off:
			errs = append(errs, fmt.Errorf("%s %d is negative", i.Name, *i.Value))
		}
	}
	return errs
}
