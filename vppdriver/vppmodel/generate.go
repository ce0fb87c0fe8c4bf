package vppmodel

// Regenerate vppdriver.pb.go from ../../proto/vswitchkit/vppdriver/v1/vppdriver.proto
// with Debian's protobuf-compiler (protoc 3.21) and the protoc-gen-go pinned
// as a tool in go.mod. The .proto files live under proto/ so that each is
// registered under a unique, versioned path (vswitchkit/<package>/v1/<file>.proto):
// two generated packages linked into one program must never register the
// same file name.
//
//go:generate sh -c "protoc --plugin=protoc-gen-go=\"$(go tool -n protoc-gen-go)\" -I ../../proto --go_out=../.. --go_opt=module=github.com/vswitchkit/vswitchkit vswitchkit/vppdriver/v1/vppdriver.proto"
