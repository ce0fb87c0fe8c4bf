package lifecycle

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestOnce(t *testing.T) {
	var o Once
	assert.False(t, o.Started())
	require.NoError(t, o.Start("watcher"))
	assert.True(t, o.Started())
	err := o.Start("watcher")
	require.Error(t, err)
	assert.EqualError(t, err, "watcher: Run called more than once")
	assert.True(t, errors.Is(err, ErrAlreadyRunning))
}
