package podiface_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/vswitchkit/vswitchkit/controller/podiface"
)

func TestParseType(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want podiface.Type
		err  bool
	}{
		{"", podiface.Default, false},
		{"tap", podiface.Tap, false},
		{"af_packet", podiface.AfPacket, false},
		{"memif", podiface.Memif, false},
		{"veth", "", true},
		{"TAP", "", true},
	} {
		got, err := podiface.ParseType(tc.in)
		if tc.err {
			assert.Error(t, err, tc.in)
			continue
		}
		assert.NoError(t, err, tc.in)
		assert.Equal(t, tc.want, got)
	}
}
