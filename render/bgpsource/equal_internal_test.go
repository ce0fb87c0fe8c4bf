package bgpsource

import (
	"net/netip"
	"reflect"
	"testing"

	"github.com/vswitchkit/vswitchkit/bgp"
)

// TestServiceEqualCoversEveryField sets each field of bgp.Service in turn:
// serviceEqual must notice every one, so that a field added to bgp.Service
// later is not ignored by the change detection.
func TestServiceEqualCoversEveryField(t *testing.T) {
	typ := reflect.TypeFor[bgp.Service]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		var b bgp.Service
		v := reflect.ValueOf(&b).Elem().Field(i)
		switch f.Type.Kind() {
		case reflect.String:
			v.SetString("x")
		case reflect.Bool:
			v.SetBool(true)
		case reflect.Map:
			v.Set(reflect.ValueOf(map[string]string{"k": "v"}))
		case reflect.Slice:
			v.Set(reflect.ValueOf([]netip.Addr{netip.MustParseAddr("192.0.2.1")}))
		default:
			t.Fatalf("field %s of kind %s: teach this test to set it", f.Name, f.Type.Kind())
		}
		if serviceEqual(bgp.Service{}, b) {
			t.Errorf("serviceEqual ignores bgp.Service.%s", f.Name)
		}
	}
}
