package kubetest_test

import (
	"fmt"

	"github.com/vswitchkit/vswitchkit/internal/kubetest"
)

// DecodeYAML reads manifests as kubectl does, one object per document;
// Apply then applies them to a Cluster with server-side apply.
func ExampleDecodeYAML() {
	objs, err := kubetest.DecodeYAML([]byte(`
apiVersion: v1
kind: Namespace
metadata: {name: demo}
---
# only a comment
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: demo}
data: {mode: real}
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, o := range objs {
		fmt.Println(o.GetKind(), o.GetNamespace(), o.GetName())
	}
	// Output:
	// Namespace  demo
	// ConfigMap demo settings
}
