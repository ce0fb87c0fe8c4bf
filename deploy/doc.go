// Package deploy holds the manifests that install vswitchkit on a real
// cluster (README.md in this folder is the install guide): config.yaml
// (the cluster's settings), crds.yaml (every custom resource definition of
// the repository, generated), reflector.yaml (the reflector's Deployment
// and RBAC) and vswitch.yaml (the per-node daemon's DaemonSet, which also
// installs the CNI plugin). Its tests apply them to a real API server
// (internal/kubetest). The package exposes the files and the generator of
// crds.yaml.
package deploy

//go:generate go run ./gencrds
