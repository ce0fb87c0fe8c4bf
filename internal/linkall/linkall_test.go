package linkall_test

import (
	"encoding/hex"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/anypb"

	// Every importable package of the module. TestEveryPackageLinked fails
	// when a package is missing here, so a new package is linked as soon as
	// it exists.
	_ "github.com/vswitchkit/vswitchkit/agent"
	_ "github.com/vswitchkit/vswitchkit/bgp"
	"github.com/vswitchkit/vswitchkit/bgp/bgpmodel"
	_ "github.com/vswitchkit/vswitchkit/bgp/bgpreflector"
	_ "github.com/vswitchkit/vswitchkit/bgp/bgpstatus"
	_ "github.com/vswitchkit/vswitchkit/bgp/bgptest"
	_ "github.com/vswitchkit/vswitchkit/bgp/gobgp"
	_ "github.com/vswitchkit/vswitchkit/bgp/gobgp/gobgptest"
	_ "github.com/vswitchkit/vswitchkit/cniserver"
	_ "github.com/vswitchkit/vswitchkit/cniserver/cniplugin"
	_ "github.com/vswitchkit/vswitchkit/cniserver/cniservertest"
	_ "github.com/vswitchkit/vswitchkit/cniserver/linuxpod"
	_ "github.com/vswitchkit/vswitchkit/controller"
	_ "github.com/vswitchkit/vswitchkit/controller/controllertest"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	_ "github.com/vswitchkit/vswitchkit/controller/podiface"
	_ "github.com/vswitchkit/vswitchkit/deploy"
	_ "github.com/vswitchkit/vswitchkit/embedetcd"
	_ "github.com/vswitchkit/vswitchkit/embedetcd/etcdtest"
	_ "github.com/vswitchkit/vswitchkit/internal/cfgutil"
	_ "github.com/vswitchkit/vswitchkit/internal/kubetest"
	_ "github.com/vswitchkit/vswitchkit/internal/lifecycle"
	_ "github.com/vswitchkit/vswitchkit/internal/retry"
	_ "github.com/vswitchkit/vswitchkit/internal/testseed"
	_ "github.com/vswitchkit/vswitchkit/internal/vppconv"
	_ "github.com/vswitchkit/vswitchkit/ipam"
	_ "github.com/vswitchkit/vswitchkit/ipam/boltstore"
	_ "github.com/vswitchkit/vswitchkit/ipam/etcdstore"
	_ "github.com/vswitchkit/vswitchkit/ipam/ipamtest"
	_ "github.com/vswitchkit/vswitchkit/nodesync"
	_ "github.com/vswitchkit/vswitchkit/nodesync/etcddb"
	"github.com/vswitchkit/vswitchkit/nodesync/nodesyncmodel"
	_ "github.com/vswitchkit/vswitchkit/nodesync/nodesynctest"
	_ "github.com/vswitchkit/vswitchkit/policy"
	_ "github.com/vswitchkit/vswitchkit/policy/policytest"
	_ "github.com/vswitchkit/vswitchkit/reflector"
	_ "github.com/vswitchkit/vswitchkit/render/aclpolicy"
	_ "github.com/vswitchkit/vswitchkit/render/bgproutes"
	_ "github.com/vswitchkit/vswitchkit/render/bgpsource"
	_ "github.com/vswitchkit/vswitchkit/render/nodeaddr"
	_ "github.com/vswitchkit/vswitchkit/render/nodeconn"
	_ "github.com/vswitchkit/vswitchkit/render/podconn"
	_ "github.com/vswitchkit/vswitchkit/render/svccnat"
	_ "github.com/vswitchkit/vswitchkit/render/svcnat"
	_ "github.com/vswitchkit/vswitchkit/svcprocessor"
	_ "github.com/vswitchkit/vswitchkit/svcprocessor/svcprocessortest"
	_ "github.com/vswitchkit/vswitchkit/vppdriver"
	_ "github.com/vswitchkit/vswitchkit/vppdriver/vppdrivertest"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppmodel"
	_ "github.com/vswitchkit/vswitchkit/vppdriver/vppsim"
	_ "github.com/vswitchkit/vswitchkit/watcher"
)

// This test binary is the program that imports every package: had two
// generated files registered the same name, it would have panicked before
// any test ran. The tests below check what the registry holds and that no
// package of the module is left out.

// TestEveryPackageLinked compares the imports above with `go list ./...`:
// every package except commands (package main) and internal packages of
// other subtrees (which Go does not let this package import; their parents
// link them) must be imported here.
func TestEveryPackageLinked(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go command is not on PATH; cannot list the module's packages")
	}
	out, err := exec.Command(goTool, "list", "-f", "{{.ImportPath}} {{.Name}}", "github.com/vswitchkit/vswitchkit/...").Output()
	require.NoError(t, err, "go list")
	src, err := exec.Command(goTool, "list", "-test", "-f", "{{if .ForTest}}{{.ImportPath}}|{{join .Imports \" \"}}{{end}}", ".").Output()
	require.NoError(t, err, "go list -test")
	var imported []string
	for line := range strings.SplitSeq(strings.TrimSpace(string(src)), "\n") {
		path, imports, ok := strings.Cut(line, "|")
		if ok && strings.HasSuffix(path, "linkall_test [github.com/vswitchkit/vswitchkit/internal/linkall.test]") {
			imported = strings.Fields(imports)
		}
	}
	require.NotEmpty(t, imported, "imports of this test package not found in:\n%s", src)
	const self = "github.com/vswitchkit/vswitchkit/internal/linkall"
	var missing []string
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		path, name, _ := strings.Cut(line, " ")
		if name == "main" || path == self || (strings.Contains(path, "/internal/") && !strings.HasPrefix(path, "github.com/vswitchkit/vswitchkit/internal/")) {
			continue
		}
		if !slices.Contains(imported, path) {
			missing = append(missing, path)
		}
	}
	assert.Empty(t, missing, "packages not linked into this test; add them to the import list of linkall_test.go")
}

// TestCoreDependencies keeps the heavy dependencies out of the packages
// that do not need them, so that a program built from the core links what
// it uses (BENCHMARKS.md, "First steps and build weight": the loop, IPAM
// and the service processor make a 7 MB binary): the etcd server, client-go
// and GoBGP only where the package's job is theirs.
func TestCoreDependencies(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go command is not on PATH; cannot list the packages' dependencies")
	}
	heavy := []string{"go.etcd.io/etcd/server/", "k8s.io/client-go/", "github.com/osrg/gobgp/"}
	const mod = "github.com/vswitchkit/vswitchkit/"
	for _, tc := range []struct {
		pkg   string
		allow []string // heavy dependencies this package may link
	}{
		{pkg: "controller"},
		{pkg: "controller/kubemodel"},
		{pkg: "ipam"},
		{pkg: "svcprocessor"},
		{pkg: "policy"},
		{pkg: "nodesync"},
		{pkg: "bgp"},
		{pkg: "vppdriver"},
		{pkg: "watcher"},
		{pkg: "render/aclpolicy"},
		{pkg: "render/svcnat"},
		{pkg: "render/svccnat"},
		{pkg: "render/podconn"},
		{pkg: "render/nodeconn"},
		{pkg: "bgp/gobgp", allow: []string{"github.com/osrg/gobgp/"}},
		{pkg: "reflector", allow: []string{"k8s.io/client-go/"}},
	} {
		t.Run(tc.pkg, func(t *testing.T) {
			out, err := exec.Command(goTool, "list", "-deps", "-f", "{{.ImportPath}}", mod+tc.pkg).CombinedOutput()
			require.NoError(t, err, "go list -deps: %s", out)
			var linked []string
			for dep := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
				for _, h := range heavy {
					if strings.HasPrefix(dep, h) && !slices.Contains(tc.allow, h) && !slices.Contains(linked, h) {
						linked = append(linked, h)
					}
				}
			}
			assert.Empty(t, linked, "%s links heavy dependencies it should not", tc.pkg)
		})
	}
}

// TestProtoFilesUnique checks that every .proto file of the module is
// registered under its versioned path vswitchkit/<package>/v<n>/<file>.proto
// and declares the versioned package of the same name.
func TestProtoFilesUnique(t *testing.T) {
	want := map[string]string{
		"vswitchkit/kubemodel/v1/kubemodel.proto": "vswitchkit.kubemodel.v1",
		"vswitchkit/nodesync/v1/nodesync.proto":   "vswitchkit.nodesync.v1",
		"vswitchkit/bgp/v1/bgp.proto":             "vswitchkit.bgp.v1",
		"vswitchkit/bgp/v2/bgpv2.proto":           "vswitchkit.bgp.v2",
		"vswitchkit/vppdriver/v1/vppdriver.proto": "vswitchkit.vppdriver.v1",
	}
	got := map[string]string{}
	protoregistry.GlobalFiles.RangeFiles(func(fd protoreflect.FileDescriptor) bool {
		if strings.HasPrefix(string(fd.Package()), "vswitchkit.") {
			got[fd.Path()] = string(fd.Package())
		}
		return true
	})
	assert.Equal(t, want, got)
}

// TestStoredValuesStayReadable: values already stored in etcd (and in the
// local bbolt mirrors) were written by the code generated before the .proto
// files moved to their versioned paths. Moving a file changes neither field
// numbers nor the package name, so the binary encoding and the type URLs of
// google.protobuf.Any values (external configuration) stay the same. The
// vectors below were produced by that earlier code (commit e80a876); each
// must decode into the same message and re-encode to the same bytes.
func TestStoredValuesStayReadable(t *testing.T) {
	for _, tc := range []struct {
		msg      proto.Message
		wire     string
		anyWire  string
		typeName string
	}{
		{
			msg:      &kubemodel.Pod{Name: "web", Namespace: "default", IpAddress: "10.1.1.2", NodeName: "node-1", Labels: map[string]string{"app": "web"}},
			wire:     "0a03776562120764656661756c741a0a0a0361707012037765622a0831302e312e312e3242066e6f64652d31",
			anyWire:  "0a2f747970652e676f6f676c65617069732e636f6d2f767377697463686b69742e6b7562656d6f64656c2e76312e506f64122c0a03776562120764656661756c741a0a0a0361707012037765622a0831302e312e312e3242066e6f64652d31",
			typeName: "vswitchkit.kubemodel.v1.Pod",
		},
		{
			msg:      &kubemodel.Node{Name: "node-1", PodCidrs: []string{"10.1.1.0/24"}},
			wire:     "0a066e6f64652d31220b31302e312e312e302f3234",
			anyWire:  "0a30747970652e676f6f676c65617069732e636f6d2f767377697463686b69742e6b7562656d6f64656c2e76312e4e6f646512150a066e6f64652d31220b31302e312e312e302f3234",
			typeName: "vswitchkit.kubemodel.v1.Node",
		},
		{
			msg:      &nodesyncmodel.VswitchNode{Id: 3, Name: "node-3", IpAddresses: []*nodesyncmodel.IPWithNetwork{{Address: "192.168.16.3", Network: "192.168.16.0/24"}}},
			wire:     "080312066e6f64652d331a1f0a0c3139322e3136382e31362e33120f3139322e3136382e31362e302f3234",
			anyWire:  "0a36747970652e676f6f676c65617069732e636f6d2f767377697463686b69742e6e6f646573796e632e76312e567377697463684e6f6465122b080312066e6f64652d331a1f0a0c3139322e3136382e31362e33120f3139322e3136382e31362e302f3234",
			typeName: "vswitchkit.nodesync.v1.VswitchNode",
		},
		{
			msg:      &nodesyncmodel.NodeIDClaim{Id: 3, Name: "node-3"},
			wire:     "080312066e6f64652d33",
			anyWire:  "0a36747970652e676f6f676c65617069732e636f6d2f767377697463686b69742e6e6f646573796e632e76312e4e6f64654944436c61696d120a080312066e6f64652d33",
			typeName: "vswitchkit.nodesync.v1.NodeIDClaim",
		},
		{
			msg:      &bgpmodel.PeeringPolicy{Name: "p1"},
			wire:     "0a027031",
			anyWire:  "0a33747970652e676f6f676c65617069732e636f6d2f767377697463686b69742e6267702e76312e50656572696e67506f6c69637912040a027031",
			typeName: "vswitchkit.bgp.v1.PeeringPolicy",
		},
		{
			msg:      &vppmodel.Route{DstNetwork: "10.1.2.0/24", Paths: []*vppmodel.Path{{OutgoingInterface: "vxlan2", NextHop: "192.168.30.2", Weight: 1}}},
			wire:     "120b31302e312e322e302f32341a180a0676786c616e32120c3139322e3136382e33302e321801",
			anyWire:  "0a31747970652e676f6f676c65617069732e636f6d2f767377697463686b69742e7670706472697665722e76312e526f7574651227120b31302e312e322e302f32341a180a0676786c616e32120c3139322e3136382e33302e321801",
			typeName: "vswitchkit.vppdriver.v1.Route",
		},
	} {
		t.Run(tc.typeName, func(t *testing.T) {
			wire, err := hex.DecodeString(tc.wire)
			require.NoError(t, err)
			got := tc.msg.ProtoReflect().New().Interface()
			require.NoError(t, proto.Unmarshal(wire, got))
			assert.True(t, proto.Equal(tc.msg, got), "decoded %v, want %v", got, tc.msg)
			again, err := proto.MarshalOptions{Deterministic: true}.Marshal(got)
			require.NoError(t, err)
			assert.Equal(t, tc.wire, hex.EncodeToString(again))

			// External configuration: a stored Any resolves through the
			// global registry to the same message.
			anyWire, err := hex.DecodeString(tc.anyWire)
			require.NoError(t, err)
			var a anypb.Any
			require.NoError(t, proto.Unmarshal(anyWire, &a))
			assert.Equal(t, "type.googleapis.com/"+tc.typeName, a.GetTypeUrl())
			inner, err := a.UnmarshalNew()
			require.NoError(t, err)
			assert.True(t, proto.Equal(tc.msg, inner))
		})
	}
}
