package embedetcd_test

import (
	"context"
	"fmt"
	"log"

	"github.com/vswitchkit/vswitchkit/embedetcd"
)

// Start an etcd server in the process, write a key and read it back.
func Example() {
	ctx := context.Background()
	srv, err := embedetcd.Start(ctx, embedetcd.Config{UnsafeNoFsync: true})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()

	cli, err := srv.Client()
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close()
	if _, err := cli.Put(ctx, "/vswitchkit/hello", "world"); err != nil {
		log.Fatal(err)
	}
	resp, err := cli.Get(ctx, "/vswitchkit/hello")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s = %s\n", resp.Kvs[0].Key, resp.Kvs[0].Value)
	// Output: /vswitchkit/hello = world
}
