package controller_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/controllertest"
)

func TestReplaceAll(t *testing.T) {
	a1, a2, b := wrapperspb.String("a1"), wrapperspb.String("a2"), wrapperspb.String("b")
	for _, tc := range []struct {
		name     string
		old, new controller.KeyValuePairs
		want     controller.KeyValuePairs // nil value: deleted
	}{
		{name: "nothing", want: controller.KeyValuePairs{}},
		{name: "all new", new: controller.KeyValuePairs{"a": a1, "b": b}, want: controller.KeyValuePairs{"a": a1, "b": b}},
		{name: "all gone", old: controller.KeyValuePairs{"a": a1, "b": b}, want: controller.KeyValuePairs{"a": nil, "b": nil}},
		{name: "unchanged values cost nothing", old: controller.KeyValuePairs{"a": a1, "b": b},
			new: controller.KeyValuePairs{"a": wrapperspb.String("a1"), "b": b}, want: controller.KeyValuePairs{}},
		{name: "changed, gone and new", old: controller.KeyValuePairs{"a": a1, "b": b},
			new: controller.KeyValuePairs{"a": a2, "c": b}, want: controller.KeyValuePairs{"a": a2, "b": nil, "c": b}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			txn := controllertest.NewTxn()
			n := controller.ReplaceAll(txn, tc.old, tc.new)
			got := txn.Values()
			assert.Equal(t, len(tc.want), n)
			assert.Len(t, got, len(tc.want))
			for k, v := range tc.want {
				g, ok := got[k]
				assert.True(t, ok, "key %s", k)
				assert.True(t, proto.Equal(v, g), "key %s: got %v, want %v", k, g, v)
			}
		})
	}
}
