package podiface_test

import (
	"fmt"

	"github.com/vswitchkit/vswitchkit/controller/podiface"
)

// A pod server reads the pod's annotation and decides who creates the
// interface: for af_packet it makes the veth pair itself.
func ExampleParseType() {
	for _, s := range []string{"af_packet", "", "carrier-pigeon"} {
		t, err := podiface.ParseType(s)
		switch {
		case err != nil:
			fmt.Println("error:", err)
		case t == podiface.Default:
			fmt.Println("the pod handler chooses")
		default:
			fmt.Println(t, "(veth by the pod server:", t == podiface.AfPacket, ")")
		}
	}
	// Output:
	// af_packet (veth by the pod server: true )
	// the pod handler chooses
	// error: podiface: unknown pod interface type "carrier-pigeon" (want tap, af_packet or memif)
}
