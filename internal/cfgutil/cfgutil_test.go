package cfgutil

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestDurations(t *testing.T) {
	a, b, c := time.Duration(0), 3*time.Second, -time.Second
	errs := Durations([]Duration{{Name: "A", Value: &a, Default: time.Minute}, {Name: "B", Value: &b, Default: time.Minute}, {Name: "C", Value: &c, Default: time.Minute}})
	assert.Equal(t, time.Minute, a, "zero takes the default")
	assert.Equal(t, 3*time.Second, b, "set values stay")
	assert.Len(t, errs, 1)
	assert.EqualError(t, errs[0], "C -1s is negative")
}

func TestOffAndInts(t *testing.T) {
	a, b := -time.Second, -time.Second
	errs := Durations([]Duration{{Name: "A", Value: &a, Default: time.Minute, Off: true}, {Name: "B", Value: &b, Default: time.Minute}})
	assert.Equal(t, -time.Second, a, "a negative value that may be off stays")
	assert.Len(t, errs, 1)
	x, y, z := 0, -1, -1
	errs = Ints([]Int{{Name: "X", Value: &x, Default: 5}, {Name: "Y", Value: &y, Default: 5, Off: true}, {Name: "Z", Value: &z, Default: 5}})
	assert.Equal(t, 5, x)
	assert.Equal(t, -1, y)
	assert.Len(t, errs, 1)
	assert.EqualError(t, errs[0], "Z -1 is negative")
}
