package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"

	"github.com/vswitchkit/vswitchkit/bgp/gobgp/gobgptest"
	"github.com/vswitchkit/vswitchkit/cniserver/cniplugin"
	"github.com/vswitchkit/vswitchkit/embedetcd"
)

// binary is the daemon, built once by TestMain.
var binary string

func TestMain(m *testing.M) {
	gobgptest.Main()
	code := func() int {
		dir, err := os.MkdirTemp("", "vswitch-bin")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		binary = filepath.Join(dir, "vswitch")
		args := []string{"build", "-o", binary}
		if raceEnabled {
			args = append(args, "-race")
		}
		if out, err := exec.Command("go", append(args, ".")...).CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "go build the daemon: %v\n%s", err, out)
			return 1
		}
		code := m.Run()
		if code == 0 {
			if err := goleak.Find(); err != nil {
				fmt.Fprintln(os.Stderr, "goleak:", err)
				return 1
			}
		}
		return code
	}()
	os.Exit(code)
}

// startEtcd starts an embedded etcd for the test and returns it with a
// client; both are closed when the test ends.
func startEtcd(t *testing.T) (*embedetcd.Server, *clientv3.Client) {
	t.Helper()
	srv, err := embedetcd.Start(context.Background(), embedetcd.Config{UnsafeNoFsync: true})
	require.NoError(t, err)
	t.Cleanup(func() { srv.Close() })
	cli, err := srv.Client()
	require.NoError(t, err)
	t.Cleanup(func() { cli.Close() })
	return srv, cli
}

// shortDir makes a directory with a short path (a unix socket path must
// fit in 108 bytes), removed when the test ends.
func shortDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "vskd")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// daemon is a running vswitch process.
type daemon struct {
	t      *testing.T
	cmd    *exec.Cmd
	addr   string // HTTP host:port
	exited chan struct{}
	err    error // of Wait; set when exited is closed

	mu   sync.Mutex
	logs []string // guarded by mu
}

// startDaemon runs the binary with args, its logs in JSON, and waits until
// its HTTP endpoint listens. The process is killed at the end of the test
// if it still runs.
func startDaemon(t *testing.T, args ...string) *daemon {
	t.Helper()
	d := &daemon{t: t, exited: make(chan struct{})}
	d.cmd = exec.Command(binary, args...)
	stderr, err := d.cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, d.cmd.Start())
	listening := make(chan string, 1)
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			d.mu.Lock()
			d.logs = append(d.logs, line)
			d.mu.Unlock()
			var rec struct {
				Msg     string `json:"msg"`
				Address string `json:"address"`
			}
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "HTTP listening" {
				listening <- rec.Address
			}
		}
	}()
	go func() {
		<-scanned // Wait closes the pipe: read everything first
		d.err = d.cmd.Wait()
		close(d.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-d.exited:
		default:
			_ = d.cmd.Process.Kill()
			<-d.exited
		}
		if t.Failed() {
			t.Logf("daemon logs:\n%s", strings.Join(d.lines(), "\n"))
		}
	})
	select {
	case d.addr = <-listening:
	case <-d.exited:
		t.Fatalf("the daemon exited at start: %v\n%s", d.err, strings.Join(d.lines(), "\n"))
	case <-time.After(time.Minute):
		t.Fatalf("the daemon does not listen\n%s", strings.Join(d.lines(), "\n"))
	}
	return d
}

func (d *daemon) lines() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.logs...)
}

// wait waits for the process to exit and returns its exit code.
func (d *daemon) wait() int {
	d.t.Helper()
	select {
	case <-d.exited:
	case <-time.After(2 * time.Minute):
		d.t.Fatalf("the daemon does not exit\n%s", strings.Join(d.lines(), "\n"))
	}
	var ee *exec.ExitError
	if errors.As(d.err, &ee) {
		return ee.ExitCode()
	}
	require.NoError(d.t, d.err)
	return 0
}

// stop sends SIGTERM and returns the exit code.
func (d *daemon) stop() int {
	d.t.Helper()
	require.NoError(d.t, d.cmd.Process.Signal(syscall.SIGTERM))
	return d.wait()
}

// get fetches a path of the HTTP endpoint.
func (d *daemon) get(path string) (int, string) {
	d.t.Helper()
	resp, err := http.Get("http://" + d.addr + path)
	require.NoError(d.t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(d.t, err)
	return resp.StatusCode, string(body)
}

// getJSON fetches a debug view into v.
func (d *daemon) getJSON(path string, v any) {
	d.t.Helper()
	code, body := d.get(path)
	require.Equal(d.t, http.StatusOK, code, "%s: %s", path, body)
	require.NoError(d.t, json.Unmarshal([]byte(body), v), "%s: %s", path, body)
}

func (d *daemon) waitReady() {
	d.t.Helper()
	require.Eventually(d.t, func() bool {
		code, _ := d.get("/readyz")
		return code == http.StatusOK
	}, 2*time.Minute, 20*time.Millisecond, "/readyz")
}

// metrics scrapes /metrics.
type metrics map[string]*dto.MetricFamily

func (d *daemon) metrics() metrics {
	d.t.Helper()
	code, body := d.get("/metrics")
	require.Equal(d.t, http.StatusOK, code)
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	require.NoError(d.t, err)
	return fams
}

// value returns the value of the series of name with the given labels
// (name=value pairs; a subset of the series' labels); ok is false if
// there is none. Summaries give their sample count.
func (m metrics) value(name string, labels ...string) (float64, bool) {
	fam := m[name]
	if fam == nil {
		return 0, false
	}
	for _, s := range fam.GetMetric() {
		have := map[string]string{}
		for _, l := range s.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		match := true
		for i := 0; i+1 < len(labels); i += 2 {
			if have[labels[i]] != labels[i+1] {
				match = false
			}
		}
		if !match {
			continue
		}
		switch {
		case s.Gauge != nil:
			return s.GetGauge().GetValue(), true
		case s.Counter != nil:
			return s.GetCounter().GetValue(), true
		case s.Summary != nil:
			return float64(s.GetSummary().GetSampleCount()), true
		}
	}
	return 0, false
}

// cniCall sends a CNI request to the daemon's pod server, as the plugin
// binary does.
func cniCall(socket, cmd, container, netns, pod string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return cniplugin.Call(ctx, socket, cmd, &skel.CmdArgs{
		ContainerID: container, Netns: netns, IfName: "eth0",
		Args:      "K8S_POD_NAMESPACE=default;K8S_POD_NAME=" + pod,
		StdinData: []byte(`{"cniVersion":"1.1.0","name":"vswitchkit","type":"vswitchkit-cni"}`),
	})
}

// refused tells whether nothing listens on a TCP address any more.
func refused(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err == nil {
		c.Close()
		return false
	}
	return true
}
