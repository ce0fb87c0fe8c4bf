package kubetest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// Shared is a test package's cluster: started by the first test that asks
// for it ([Shared.Get]) and stopped by TestMain ([Shared.Stop]), so a
// package that needs it pays for one start, and runs without it pay
// nothing:
//
//	var kube = &kubetest.Shared{Config: kubetest.Config{ControllerManager: true}, Etcd: startEtcd}
//
//	func TestMain(m *testing.M) {
//		code := m.Run()
//		kube.Stop()
//		os.Exit(code)
//	}
type Shared struct {
	// Config of the cluster; Etcd and Dir are set by Get.
	Config Config
	// Etcd starts the etcd the API server stores in, keeping its data in
	// dir, and returns its client URLs and a function that stops it (the
	// kit imports no etcd of its own: tests use embedetcd/etcdtest).
	Etcd func(dir string) (endpoints []string, stop func(), err error)

	once     sync.Once
	dir      string
	c        *Cluster
	stopEtcd func()
	err      error
}

// Get returns the package's cluster, starting it on first use. It skips
// the test when the binaries are not built (the message names the build
// command; in CI it fails instead: [Need]) or VSWITCHKIT_KUBE=off, and
// fails it when the cluster cannot start.
func (s *Shared) Get(t testing.TB) *Cluster {
	t.Helper()
	Need(t)
	s.once.Do(s.start)
	if s.err != nil {
		t.Fatal(s.err)
	}
	return s.c
}

func (s *Shared) start() {
	start := time.Now()
	if s.dir, s.err = os.MkdirTemp("", "kubetest-"); s.err != nil {
		return
	}
	eps, stop, err := s.Etcd(filepath.Join(s.dir, "etcd"))
	if err != nil {
		s.err = fmt.Errorf("kubetest: etcd: %w", err)
		return
	}
	s.stopEtcd = stop
	cfg := s.Config
	cfg.Etcd = eps
	cfg.Dir = filepath.Join(s.dir, "kube")
	if s.err = os.MkdirAll(cfg.Dir, 0o700); s.err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	s.c, s.err = Start(ctx, cfg)
	if s.err == nil {
		fmt.Fprintf(os.Stderr, "kubetest: control plane %s started in %.1fs (folder %s)\n", Version, time.Since(start).Seconds(), s.dir)
	}
}

// Stop stops the cluster and its etcd, if Get started them, and removes
// their folder. Call it from TestMain after m.Run.
func (s *Shared) Stop() {
	s.once.Do(func() {}) // a later Get starts nothing
	if s.c != nil {
		s.c.Stop()
	}
	if s.stopEtcd != nil {
		s.stopEtcd()
	}
	if s.dir != "" {
		os.RemoveAll(s.dir)
	}
}
