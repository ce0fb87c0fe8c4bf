package bgp_test

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vswitchkit/vswitchkit/bgp"
)

func TestParseAnnotations(t *testing.T) {
	const k = bgp.AnnotationPrefix
	tests := []struct {
		name    string
		in      map[string]string
		want    bgp.AnnotationMap
		wantErr string
	}{
		{name: "none", in: map[string]string{"other": "x"}, want: bgp.AnnotationMap{}},
		{name: "router id and port", in: map[string]string{k + "65001": "router-id=10.0.0.1,local-port=1790"},
			want: bgp.AnnotationMap{65001: {ASN: 65001, RouterID: netip.MustParseAddr("10.0.0.1"), LocalPort: 1790}}},
		{name: "empty value", in: map[string]string{k + "4294967295": ""}, want: bgp.AnnotationMap{4294967295: {ASN: 4294967295}}},
		{name: "two routers", in: map[string]string{k + "1": "local-port=179", k + "2": "router-id=1.1.1.1"},
			want: bgp.AnnotationMap{1: {ASN: 1, LocalPort: 179}, 2: {ASN: 2, RouterID: netip.MustParseAddr("1.1.1.1")}}},
		{name: "ASN zero", in: map[string]string{k + "0": ""}, wantErr: "local ASN"},
		{name: "ASN too big", in: map[string]string{k + "4294967296": ""}, wantErr: "local ASN"},
		{name: "ASN leading zero", in: map[string]string{k + "065001": ""}, wantErr: "local ASN"},
		{name: "ASN sign", in: map[string]string{k + "+1": ""}, wantErr: "local ASN"},
		{name: "IPv6 router id", in: map[string]string{k + "1": "router-id=fd00::1"}, wantErr: "router-id"},
		{name: "zero router id", in: map[string]string{k + "1": "router-id=0.0.0.0"}, wantErr: "router-id"},
		{name: "port zero", in: map[string]string{k + "1": "local-port=0"}, wantErr: "local-port"},
		{name: "port too big", in: map[string]string{k + "1": "local-port=65536"}, wantErr: "local-port"},
		{name: "port with space", in: map[string]string{k + "1": "local-port= 179"}, wantErr: "local-port"},
		{name: "space after comma", in: map[string]string{k + "1": "local-port=179, router-id=1.1.1.1"}, wantErr: "unknown attribute"},
		{name: "unknown attribute", in: map[string]string{k + "1": "asn=1"}, wantErr: "unknown attribute"},
		{name: "duplicate attribute", in: map[string]string{k + "1": "local-port=1,local-port=2"}, wantErr: "duplicate"},
		{name: "missing value", in: map[string]string{k + "1": "router-id"}, wantErr: "name=value"},
		{name: "trailing comma", in: map[string]string{k + "1": "local-port=1,"}, wantErr: "name=value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := bgp.ParseAnnotations(tt.in)
			if tt.wantErr != "" {
				require.ErrorIs(t, err, bgp.ErrInvalidAnnotation)
				assert.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func FuzzParseAnnotations(f *testing.F) {
	f.Add("65001", "router-id=10.0.0.1,local-port=1790")
	f.Add("1", "")
	f.Add("x", "local-port=0")
	f.Fuzz(func(t *testing.T, asn, value string) {
		m, err := bgp.ParseAnnotations(map[string]string{bgp.AnnotationPrefix + asn: value})
		if err != nil {
			assert.Empty(t, m)
			return
		}
		require.Len(t, m, 1)
		for a, ra := range m {
			assert.NotZero(t, a)
			assert.Equal(t, a, ra.ASN)
			if ra.RouterID.IsValid() {
				assert.True(t, ra.RouterID.Is4())
			}
		}
	})
}
