package demo

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/vswitchkit/vswitchkit/embedetcd"
	"github.com/vswitchkit/vswitchkit/internal/kubetest"
)

// startRealKube starts a real control plane for the cluster (Options.RealKube):
// kube-apiserver and kube-controller-manager (internal/kubetest; built once
// by tools/kube/build, which takes ~35 CPU-minutes the first time) on an
// etcd of their own, embedded, with the repository's CRDs installed. The
// demo's objects are then created as kubectl would, through the API
// server's validation and admission, and the real controller manager
// makes the EndpointSlices.
func (c *cluster) startRealKube(ctx context.Context) error {
	st := c.prog.stage("Kubernetes control plane (kube-apiserver "+kubetest.Version+")", 1)
	defer st.abort()
	defer c.step("Kubernetes control plane", time.Now())
	if _, err := kubetest.FindBinaries(); err != nil {
		c.prog.note("building kube-apiserver and kube-controller-manager %s once (%s: ~35 CPU-minutes, ~4 GB of Go build cache)", kubetest.Version, kubetest.BuildCommand)
		if _, err := kubetest.Build(ctx, c.opts.Progress); err != nil {
			return fmt.Errorf("demo: %w", err)
		}
	}
	srv, err := embedetcd.Start(ctx, embedetcd.Config{Dir: filepath.Join(c.dir, "kube-etcd"), Name: "kube-etcd", UnsafeNoFsync: true, Logger: c.log})
	if err != nil {
		return fmt.Errorf("demo: the API server's etcd: %w", err)
	}
	c.stops = append(c.stops, srv.Close)
	kc, err := kubetest.Start(ctx, kubetest.Config{Etcd: srv.Endpoints(), Dir: filepath.Join(c.dir, "kube"), ControllerManager: true})
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	c.stops = append(c.stops, func() error { kc.Stop(); return nil })
	cfg := kc.AdminConfig()
	// A real API server sends warnings (spec.externalIPs is deprecated):
	// into the components' log, not onto the progress lines.
	cfg.WarningHandlerWithContext = apiWarnings{c.log}
	if c.kube, err = kubernetes.NewForConfig(cfg); err != nil {
		return err
	}
	if c.dyn, err = dynamic.NewForConfig(cfg); err != nil {
		return err
	}
	root, err := kubetest.ModuleRoot()
	if err != nil {
		return err
	}
	crds, err := kubetest.CRDFiles(root)
	if err != nil {
		return err
	}
	if err := kubetest.InstallCRDs(ctx, cfg, crds...); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	c.prog.note("Kubernetes API: %s (kubectl --kubeconfig %s)", kc.URL(), kc.AdminKubeconfig())
	st.finish()
	return nil
}

// apiWarnings logs the API server's warnings at Warn.
type apiWarnings struct{ log *slog.Logger }

func (w apiWarnings) HandleWarningHeaderWithContext(ctx context.Context, _ int, _ string, text string) {
	w.log.WarnContext(ctx, "kubernetes API warning", slog.String("warning", text))
}

// setServiceStatus sets the load-balancer address of s through the status
// subresource, as a load-balancer controller does: a real API server
// drops the status a service is created with.
func (c *cluster) setServiceStatus(ctx context.Context, s *service) error {
	if !c.opts.RealKube || !s.lbIP.IsValid() {
		return nil
	}
	obj, err := c.kube.CoreV1().Services(namespace).Get(ctx, s.name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	obj.Status = serviceObject(s).Status
	_, err = c.kube.CoreV1().Services(namespace).UpdateStatus(ctx, obj, metav1.UpdateOptions{})
	return err
}

// deletePodObject deletes a pod's object once its sandbox is gone, as the
// kubelet does: at once (grace period 0), or a real API server keeps it
// Terminating.
func (c *cluster) deletePodObject(ctx context.Context, name string) error {
	return c.kube.CoreV1().Pods(namespace).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
}
