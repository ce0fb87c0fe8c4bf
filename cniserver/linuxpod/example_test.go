package linuxpod_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/vswitchkit/vswitchkit/cniserver"
	"github.com/vswitchkit/vswitchkit/cniserver/linuxpod"
)

// Example shows the netlink implementation given to the server, and its
// answer for a pod whose network namespace is gone: an error wrapping
// cniserver.ErrNetnsNotFound (an ADD reports it with CNI error code 3).
func Example() {
	var linux cniserver.Linux = linuxpod.New() // cniserver.New(loop, linux, store, cfg)
	_, err := linux.InspectLink(context.Background(), "/run/netns/vswitchkit-example-gone", "eth0")
	fmt.Println(errors.Is(err, cniserver.ErrNetnsNotFound))
	// A missing namespace is no error for DeleteLink (DEL is idempotent).
	fmt.Println(linux.DeleteLink(context.Background(), "/run/netns/vswitchkit-example-gone", "eth0"))
	// Output:
	// true
	// <nil>
}
