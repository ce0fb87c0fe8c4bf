package bgpmodel

// Regenerate bgp.pb.go and bgpv2.pb.go from ../../proto/vswitchkit/bgp/v1/bgp.proto
// and ../../proto/vswitchkit/bgp/v2/bgpv2.proto with Debian's protobuf-compiler
// (protoc 3.21) and the protoc-gen-go pinned as a tool in go.mod. The .proto
// files live under proto/ so that each is registered under a unique,
// versioned path (vswitchkit/<package>/v1/<file>.proto): two generated
// packages linked into one program must never register the same file name.
//
//go:generate sh -c "protoc --plugin=protoc-gen-go=\"$(go tool -n protoc-gen-go)\" -I ../../proto --go_out=../.. --go_opt=module=github.com/vswitchkit/vswitchkit vswitchkit/bgp/v1/bgp.proto"
//go:generate sh -c "protoc --plugin=protoc-gen-go=\"$(go tool -n protoc-gen-go)\" -I ../../proto --go_out=../.. --go_opt=module=github.com/vswitchkit/vswitchkit vswitchkit/bgp/v2/bgpv2.proto"
