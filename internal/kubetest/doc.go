// Package kubetest runs a real Kubernetes control plane on loopback, with
// no containers, for the module's tests and the demo's real mode: a
// kube-apiserver with RBAC on, and optionally a kube-controller-manager
// that runs only the controllers a network plugin meets (endpointslice,
// namespace, garbagecollector and serviceaccount, which pods need to be
// admitted), on an etcd the caller provides (tests use embedetcd/etcdtest).
//
// The binaries are built once, from k8s.io/kubernetes at [Version] in the
// separate module tools/kube (so that k8s.io/kubernetes never enters this
// module's graph), into a cache keyed by the version:
//
//	nice -n 10 tools/kube/build     # ~35 CPU-minutes and ~4 GB of Go build cache, once
//
// [FindBinaries] looks for them there; when they are absent, [Need] (and
// [Shared.Get]) skips the test with a message naming that command, so
// `go test ./...` stays hermetic and fast, except where they are
// [Required] (CI=true or VSWITCHKIT_KUBE=on): there it fails the test, so
// that a CI lane without binaries cannot pass by skipping. Setting
// VSWITCHKIT_KUBE=off skips those tests even when the binaries are there
// (CI runs them in a lane of their own).
//
// A [Cluster] generates its serving certificate, a service-account signing
// key and a static token file, starts the API server on a free loopback
// port, waits for /readyz, writes an admin kubeconfig, and can stop and
// start the API server again on the same port and etcd (restart tests).
// [Cluster.Stop] stops every process it started. A test package starts one
// cluster, lazily, through a package-level [Shared] that TestMain stops.
package kubetest
