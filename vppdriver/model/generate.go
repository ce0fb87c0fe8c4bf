package model

// Regenerate model.pb.go with Debian's protobuf-compiler (protoc 3.21) and the
// protoc-gen-go pinned as a tool in go.mod:
//
//go:generate sh -c "protoc --plugin=protoc-gen-go=\"$(go tool -n protoc-gen-go)\" --go_out=. --go_opt=paths=source_relative model.proto"
