package cfgutil

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestDurations(t *testing.T) {
	a, b, c := time.Duration(0), 3*time.Second, -time.Second
	errs := Durations([]Duration{{"A", &a, time.Minute}, {"B", &b, time.Minute}, {"C", &c, time.Minute}})
	assert.Equal(t, time.Minute, a, "zero takes the default")
	assert.Equal(t, 3*time.Second, b, "set values stay")
	assert.Len(t, errs, 1)
	assert.EqualError(t, errs[0], "C -1s is negative")
}
