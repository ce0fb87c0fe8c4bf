package aclpolicy

// For the tests of package aclpolicy_test (packets_test.go), which cannot
// be in this package: they use render/internal/rendertest, which imports
// it.
var (
	KubeState = kubeState
	Changes   = changes
)
