// Command gencrds writes deploy/crds.yaml: every CustomResourceDefinition
// of the repository (the YAML files that define them, wherever their
// packages keep them), so that the deployment folder is complete. Run it
// with `go generate ./deploy`; deploy's tests fail when the file is stale.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/vswitchkit/vswitchkit/deploy"
)

func main() {
	root, err := filepath.Abs("..")
	if err == nil {
		var b []byte
		if b, err = deploy.GenerateCRDs(root); err == nil {
			err = os.WriteFile(filepath.Join(root, "deploy", deploy.CRDsFile), b, 0o644)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gencrds:", err)
		os.Exit(1)
	}
}
