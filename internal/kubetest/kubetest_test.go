package kubetest_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/vswitchkit/vswitchkit/embedetcd/etcdtest"
	"github.com/vswitchkit/vswitchkit/internal/kubetest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	shared.Stop()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: errors on successful test run: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

var shared = &kubetest.Shared{Config: kubetest.Config{ControllerManager: true}, Etcd: func(dir string) ([]string, func(), error) {
	srv, err := etcdtest.Start(dir)
	if err != nil {
		return nil, nil, err
	}
	return []string{"http://" + srv.Endpoint()}, srv.Close, nil
}}

// TestVersionIsTheToolsModules: the kit looks for the version the tools
// module builds.
func TestVersionIsTheToolsModules(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "tools", "kube", "go.mod"))
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^\s*k8s\.io/kubernetes (v\S+)`).FindSubmatch(b)
	require.NotNil(t, m)
	assert.Equal(t, kubetest.Version, string(m[1]))
}

// TestNoBinaries: without the binaries the error names the build command,
// and Shared.Get skips with it (outside CI).
func TestNoBinaries(t *testing.T) {
	t.Setenv(kubetest.EnvCache, t.TempDir())
	t.Setenv(kubetest.EnvSwitch, "")
	t.Setenv(kubetest.EnvCI, "")
	_, err := kubetest.FindBinaries()
	require.ErrorIs(t, err, kubetest.ErrNoBinaries)
	assert.Contains(t, err.Error(), kubetest.BuildCommand)
	s := &kubetest.Shared{}
	skipped := false
	t.Run("get", func(t *testing.T) {
		defer func() { skipped = t.Skipped() }()
		s.Get(t)
	})
	assert.True(t, skipped)
	s.Stop()
}

func TestCRDFiles(t *testing.T) {
	root, err := kubetest.ModuleRoot()
	require.NoError(t, err)
	files, err := kubetest.CRDFiles(root)
	require.NoError(t, err)
	assert.Contains(t, files, filepath.Join(root, "bgp", "bgpreflector", "crd.yaml"))
	for _, f := range files {
		assert.NotContains(t, f, string(filepath.Separator)+"deploy"+string(filepath.Separator))
	}
}

// TestKubeCluster starts the control plane: the API server answers with
// RBAC on (an account without bindings is refused, as in a real
// cluster), the controller manager made the default service account,
// the API server restarts on the same address with its data, and Stop
// ends every process.
func TestKubeCluster(t *testing.T) {
	c := shared.Get(t)
	ctx := context.Background()
	kube := c.Admin()
	v, err := kube.Discovery().ServerVersion()
	require.NoError(t, err)
	assert.Equal(t, kubetest.Version, v.GitVersion)
	_, err = kube.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kept"}}, metav1.CreateOptions{})
	require.NoError(t, err)

	saCfg, err := c.ServiceAccountConfig(ctx, "default", "nobody")
	require.NoError(t, err)
	nobody, err := kubernetesFor(saCfg)
	require.NoError(t, err)
	_, err = nobody.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "forbidden")

	rss, peak, err := c.APIServerRSS()
	require.NoError(t, err)
	t.Logf("kube-apiserver RSS %d MB (peak %d MB)", rss>>20, peak>>20)
	start := time.Now()
	require.NoError(t, c.RestartAPIServer(ctx))
	t.Logf("restart to /readyz: %.1fs", time.Since(start).Seconds())
	_, err = kube.CoreV1().ConfigMaps("default").Get(ctx, "kept", metav1.GetOptions{})
	require.NoError(t, err, "the data survives a restart")
	c.StopAPIServer(true)
	_, _, err = c.APIServerRSS()
	require.Error(t, err)
	require.NoError(t, c.StartAPIServer(ctx))
}

func kubernetesFor(cfg *rest.Config) (kubernetes.Interface, error) {
	return kubernetes.NewForConfig(cfg)
}

// TestNoBinariesRequired: where the binaries are required (CI=true, or
// VSWITCHKIT_KUBE=on), their absence fails the test instead of skipping
// it; VSWITCHKIT_KUBE=off still skips.
func TestNoBinariesRequired(t *testing.T) {
	t.Setenv(kubetest.EnvCache, t.TempDir())
	for _, tc := range []struct {
		ci, sw          string
		required, skips bool
	}{
		{"", "", false, true},
		{"true", "", true, false},
		{"", "on", true, false},
		{"true", "off", false, true},
		{"false", "", false, true},
	} {
		t.Setenv(kubetest.EnvCI, tc.ci)
		t.Setenv(kubetest.EnvSwitch, tc.sw)
		assert.Equal(t, tc.required, kubetest.Required(), "CI=%q %s=%q", tc.ci, kubetest.EnvSwitch, tc.sw)
		rec := &recordTB{TB: t}
		done := make(chan struct{})
		go func() { defer close(done); kubetest.Need(rec) }()
		<-done
		assert.Equal(t, tc.skips, rec.skipped, "CI=%q %s=%q: skipped", tc.ci, kubetest.EnvSwitch, tc.sw)
		assert.Equal(t, !tc.skips, rec.failed, "CI=%q %s=%q: failed", tc.ci, kubetest.EnvSwitch, tc.sw)
	}
}

// recordTB records a Skip or a Fatal (and ends the goroutine, as they do)
// instead of acting on the test.
type recordTB struct {
	testing.TB
	skipped, failed bool
}

func (r *recordTB) Helper()               {}
func (r *recordTB) Skip(...any)           { r.skipped = true; runtime.Goexit() }
func (r *recordTB) Skipf(string, ...any)  { r.skipped = true; runtime.Goexit() }
func (r *recordTB) Fatal(...any)          { r.failed = true; runtime.Goexit() }
func (r *recordTB) Fatalf(string, ...any) { r.failed = true; runtime.Goexit() }
