package kubetest

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Controllers are the kube-controller-manager controllers a [Cluster]
// runs: EndpointSlices from Services and Pods, namespace deletion (the
// "kubernetes" finalizer), the garbage collector (owner references), and
// the default service account of each namespace, without which the
// ServiceAccount admission plugin refuses pods.
var Controllers = []string{"endpointslice", "namespace", "garbagecollector", "serviceaccount"}

// ServiceCIDR is the cluster's service range (--service-cluster-ip-range);
// the API server gives default/kubernetes its first address, 10.96.0.1.
const ServiceCIDR = "10.96.0.0/16"

// Config configures a [Cluster]. Etcd is required.
type Config struct {
	// Etcd are the client URLs (or host:port) of the etcd the API server
	// stores in; an etcd v3.6 (embedetcd): the API server's watch-list
	// needs it.
	Etcd []string
	// EtcdPrefix is the API server's --etcd-prefix. Default "/registry".
	EtcdPrefix string
	// Dir holds the certificates, keys, tokens, kubeconfigs and the
	// processes' logs (kube-apiserver.log, kube-controller-manager.log).
	// Default: a temporary folder that Stop removes.
	Dir string
	// ControllerManager also starts kube-controller-manager with the
	// [Controllers].
	ControllerManager bool
	// Binaries default to [FindBinaries].
	Binaries Binaries
	// APIServerArgs are appended to the API server's arguments.
	APIServerArgs []string
	// ReadyTimeout bounds each start of the API server until /readyz.
	// Default 2 minutes.
	ReadyTimeout time.Duration
}

// Cluster is a running control plane. Its methods are safe for concurrent
// use, except that Stop must be called once, last.
type Cluster struct {
	cfg     Config
	tempDir bool
	port    int
	pki     *pki
	admin   *rest.Config

	mu  sync.Mutex
	api *proc
	kcm *proc
}

// Start starts the API server (and the controller manager), waits until
// it is ready, and writes the admin kubeconfig. On error, everything it
// started is stopped.
func Start(ctx context.Context, cfg Config) (_ *Cluster, err error) {
	if len(cfg.Etcd) == 0 {
		return nil, errors.New("kubetest: Config.Etcd is empty")
	}
	if cfg.EtcdPrefix == "" {
		cfg.EtcdPrefix = "/registry"
	}
	if cfg.ReadyTimeout == 0 {
		cfg.ReadyTimeout = 2 * time.Minute
	}
	if cfg.Binaries.APIServer == "" {
		if cfg.Binaries, err = FindBinaries(); err != nil {
			return nil, err
		}
	}
	c := &Cluster{cfg: cfg}
	if c.cfg.Dir == "" {
		if c.cfg.Dir, err = os.MkdirTemp("", "kubetest-"); err != nil {
			return nil, fmt.Errorf("kubetest: %w", err)
		}
		c.tempDir = true
	} else if err := os.MkdirAll(c.cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("kubetest: %w", err)
	}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()
	if c.pki, err = newPKI(c.cfg.Dir); err != nil {
		return nil, fmt.Errorf("kubetest: certificates: %w", err)
	}
	if c.port, err = freePort(); err != nil {
		return nil, fmt.Errorf("kubetest: %w", err)
	}
	c.admin = &rest.Config{
		Host:            c.URL(),
		BearerToken:     c.pki.adminToken,
		TLSClientConfig: rest.TLSClientConfig{CAData: c.pki.caPEM},
		QPS:             -1, // no client-side rate limit: tests create many objects
	}
	if err := c.WriteKubeconfig(c.AdminKubeconfig(), c.admin); err != nil {
		return nil, err
	}
	if err := c.StartAPIServer(ctx); err != nil {
		return nil, err
	}
	if cfg.ControllerManager {
		if err := c.startControllerManager(ctx); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// URL is the API server's address, https://127.0.0.1:<port>; it stays
// the same across restarts.
func (c *Cluster) URL() string { return "https://127.0.0.1:" + strconv.Itoa(c.port) }

// Dir is the cluster's folder (certificates, kubeconfigs, logs).
func (c *Cluster) Dir() string { return c.cfg.Dir }

// EtcdPrefix is the API server's --etcd-prefix.
func (c *Cluster) EtcdPrefix() string { return c.cfg.EtcdPrefix }

// AdminConfig returns a client configuration of the cluster's
// administrator (system:masters), without a client-side rate limit.
func (c *Cluster) AdminConfig() *rest.Config { return rest.CopyConfig(c.admin) }

// AdminKubeconfig is the path of the administrator's kubeconfig.
func (c *Cluster) AdminKubeconfig() string { return filepath.Join(c.cfg.Dir, "admin.kubeconfig") }

// Admin returns a clientset of the administrator.
func (c *Cluster) Admin() kubernetes.Interface { return kubernetes.NewForConfigOrDie(c.AdminConfig()) }

// CAData is the PEM certificate of the CA that signed the API server's
// serving certificate.
func (c *Cluster) CAData() []byte { return bytes.Clone(c.pki.caPEM) }

// WriteKubeconfig writes a kubeconfig of cfg (a bearer token and the CA)
// to path.
func (c *Cluster) WriteKubeconfig(path string, cfg *rest.Config) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["kubetest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["user"] = &clientcmdapi.AuthInfo{Token: cfg.BearerToken}
	kc.Contexts["kubetest"] = &clientcmdapi.Context{Cluster: "kubetest", AuthInfo: "user"}
	kc.CurrentContext = "kubetest"
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return fmt.Errorf("kubetest: write %s: %w", path, err)
	}
	return nil
}

// ServiceAccountConfig returns a client configuration that authenticates
// as the service account namespace/name (created when missing; the
// namespace must exist) with a token from the TokenRequest API, as a pod
// of that account gets. It has client-go's default rate limits, like a
// program built with clientcmd. What the account may do is up to the RBAC
// bindings the caller applies.
func (c *Cluster) ServiceAccountConfig(ctx context.Context, namespace, name string) (*rest.Config, error) {
	kube := c.Admin()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	if _, err := kube.CoreV1().ServiceAccounts(namespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("kubetest: service account %s/%s: %w", namespace, name, err)
	}
	exp := int64((24 * time.Hour).Seconds())
	tr, err := kube.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &exp}}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("kubetest: token of %s/%s: %w", namespace, name, err)
	}
	return &rest.Config{Host: c.URL(), BearerToken: tr.Status.Token, TLSClientConfig: rest.TLSClientConfig{CAData: c.pki.caPEM}}, nil
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func (c *Cluster) apiServerArgs() []string {
	args := []string{
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(c.port),
		"--tls-cert-file=" + c.pki.certFile,
		"--tls-private-key-file=" + c.pki.keyFile,
		"--cert-dir=" + filepath.Join(c.cfg.Dir, "certs"),
		"--etcd-servers=" + strings.Join(c.cfg.Etcd, ","),
		"--etcd-prefix=" + c.cfg.EtcdPrefix,
		"--token-auth-file=" + c.pki.tokenFile,
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + c.pki.saPubFile,
		"--service-account-signing-key-file=" + c.pki.saKeyFile,
		"--service-cluster-ip-range=" + ServiceCIDR,
		// On loopback the default "lease" reconciler would publish
		// 127.0.0.1 as the endpoint of default/kubernetes, which the API
		// server refuses.
		"--endpoint-reconciler-type=none",
		// The network plugin's DaemonSet is privileged.
		"--allow-privileged=true",
		"--profiling=false",
		"--v=1",
	}
	return append(args, c.cfg.APIServerArgs...)
}

// StartAPIServer starts the API server after [Cluster.StopAPIServer], on
// the same port, certificates and etcd, and waits until /readyz answers.
// It does nothing when the API server runs.
func (c *Cluster) StartAPIServer(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.api != nil && !c.api.exited() {
		return nil
	}
	p, err := startProc(c.cfg.Dir, "kube-apiserver", c.cfg.Binaries.APIServer, c.apiServerArgs())
	if err != nil {
		return err
	}
	c.api = p
	if err := c.waitReady(ctx, p); err != nil {
		p.stop(false)
		return err
	}
	return nil
}

// StopAPIServer stops the API server gracefully (SIGTERM: it ends its
// watches and closes its connections), or at once with kill (SIGKILL: the
// connections are cut, as in a crash). Its etcd keeps the data.
func (c *Cluster) StopAPIServer(kill bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.api != nil {
		c.api.stop(kill)
	}
}

// RestartAPIServer stops the API server gracefully and starts it again,
// waiting for /readyz.
func (c *Cluster) RestartAPIServer(ctx context.Context) error {
	c.StopAPIServer(false)
	return c.StartAPIServer(ctx)
}

// APIServerRSS returns the API server's resident memory now and its peak
// (VmRSS and VmHWM), in bytes.
func (c *Cluster) APIServerRSS() (rss, peak int64, err error) {
	c.mu.Lock()
	p := c.api
	c.mu.Unlock()
	if p == nil || p.exited() {
		return 0, 0, errors.New("kubetest: the API server is not running")
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return 0, 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && (f[0] == "VmRSS:" || f[0] == "VmHWM:") {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			if f[0] == "VmRSS:" {
				rss = kb << 10
			} else {
				peak = kb << 10
			}
		}
	}
	return rss, peak, nil
}

// waitReady polls /readyz until it answers 200, the process exits, or the
// timeout.
func (c *Cluster) waitReady(ctx context.Context, p *proc) error {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(c.pki.caPEM)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.ReadyTimeout)
	defer cancel()
	var last string
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.URL()+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+c.pki.adminToken)
		resp, err := hc.Do(req)
		if err == nil {
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Sprintf("%d %s", resp.StatusCode, b)
		} else {
			last = err.Error()
		}
		select {
		case <-p.done:
			return fmt.Errorf("kubetest: kube-apiserver exited (%v) before it was ready; its log: %s\n%s", p.err, p.logPath, p.tail())
		case <-ctx.Done():
			return fmt.Errorf("kubetest: kube-apiserver not ready (%s) within %v; its log: %s\n%s", last, c.cfg.ReadyTimeout, p.logPath, p.tail())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// startControllerManager starts kube-controller-manager and waits until
// its service-account controller made default/default (the controllers
// are running).
func (c *Cluster) startControllerManager(ctx context.Context) error {
	kcmConfig := rest.CopyConfig(c.admin)
	kcmConfig.BearerToken = c.pki.kcmToken
	path := filepath.Join(c.cfg.Dir, "kube-controller-manager.kubeconfig")
	if err := c.WriteKubeconfig(path, kcmConfig); err != nil {
		return err
	}
	p, err := startProc(c.cfg.Dir, "kube-controller-manager", c.cfg.Binaries.ControllerManager, []string{
		"--kubeconfig=" + path,
		"--controllers=" + strings.Join(Controllers, ","),
		"--leader-elect=false",
		"--use-service-account-credentials=false",
		"--bind-address=127.0.0.1",
		"--secure-port=0",
		"--v=1",
	})
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.kcm = p
	c.mu.Unlock()
	kube := c.Admin()
	ctx, cancel := context.WithTimeout(ctx, c.cfg.ReadyTimeout)
	defer cancel()
	for {
		if _, err := kube.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{}); err == nil {
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("kubetest: kube-controller-manager exited (%v); its log: %s\n%s", p.err, p.logPath, p.tail())
		case <-ctx.Done():
			return fmt.Errorf("kubetest: kube-controller-manager made no default service account within %v; its log: %s\n%s", c.cfg.ReadyTimeout, p.logPath, p.tail())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Stop stops the controller manager and the API server (SIGTERM, then
// SIGKILL after 20 s) and waits for them; a temporary Dir is removed.
func (c *Cluster) Stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.kcm != nil {
		c.kcm.stop(false)
	}
	if c.api != nil {
		c.api.stop(false)
	}
	if c.tempDir {
		os.RemoveAll(c.cfg.Dir)
	}
}

// proc is a started program whose output goes to a log file.
type proc struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{} // closed when it exited; err is set then
	err     error
}

func startProc(dir, name, path string, args []string) (*proc, error) {
	logPath := filepath.Join(dir, name+".log")
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("kubetest: %w", err)
	}
	defer log.Close() // the child has its own descriptor
	fmt.Fprintf(log, "==== %s %s\n", time.Now().Format(time.RFC3339Nano), strings.Join(append([]string{path}, args...), " "))
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = log, log
	// The process dies with the test binary, even when that is killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("kubetest: start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop signals the process (SIGTERM, or SIGKILL with kill) and waits for
// it; after 20 s of SIGTERM it is killed.
func (p *proc) stop(kill bool) {
	if p.exited() {
		return
	}
	sig := syscall.SIGTERM
	if kill {
		sig = syscall.SIGKILL
	}
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// tail returns the end of the log.
func (p *proc) tail() string {
	b, _ := os.ReadFile(p.logPath)
	if len(b) > 3000 {
		b = b[len(b)-3000:]
	}
	return string(b)
}
