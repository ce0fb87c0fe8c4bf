package clustersim

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// envMember holds the JSON [memberConfig] of an etcd member child.
const envMember = "VSWITCHKIT_SIM_ETCD"

// memberConfig configures one member of the simulation's etcd cluster.
type memberConfig struct {
	Name           string
	Dir            string
	ClientURL      string
	PeerURL        string
	InitialCluster string // name=peerURL,...
	TickMs         uint
	ElectionMs     uint
	Quota          int64
}

// memberMain runs an etcd member (the embed package of the module's
// go.etcd.io/etcd/server/v3) until its standard input closes; it prints
// "READY" once the member serves clients.
func memberMain() int {
	var cfg memberConfig
	if err := json.Unmarshal([]byte(os.Getenv(envMember)), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "etcd member: config:", err)
		return 2
	}
	ec := embed.NewConfig()
	ec.Name = cfg.Name
	ec.Dir = cfg.Dir
	cu, err := url.Parse(cfg.ClientURL)
	if err != nil {
		fmt.Fprintln(os.Stderr, "etcd member:", err)
		return 2
	}
	pu, err := url.Parse(cfg.PeerURL)
	if err != nil {
		fmt.Fprintln(os.Stderr, "etcd member:", err)
		return 2
	}
	ec.ListenClientUrls, ec.AdvertiseClientUrls = []url.URL{*cu}, []url.URL{*cu}
	ec.ListenPeerUrls, ec.AdvertisePeerUrls = []url.URL{*pu}, []url.URL{*pu}
	ec.InitialCluster = cfg.InitialCluster
	ec.InitialClusterToken = "vswitchkit-sim"
	ec.ClusterState = embed.ClusterStateFlagNew
	// The data directory is thrown away after the run: fsync would
	// measure the VM's disk, not etcd's work (as the nodesync benchmarks).
	ec.UnsafeNoFsync = true
	ec.QuotaBackendBytes = cfg.Quota
	ec.TickMs, ec.ElectionMs = cfg.TickMs, cfg.ElectionMs
	ec.Logger = "zap"
	ec.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	e, err := embed.StartEtcd(ec)
	if err != nil {
		fmt.Fprintln(os.Stderr, "etcd member: start:", err)
		return 1
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		fmt.Fprintln(os.Stderr, "etcd member: failed while starting:", err)
		return 1
	case <-time.After(2 * time.Minute):
		fmt.Fprintln(os.Stderr, "etcd member: not ready after 2m")
		return 1
	}
	fmt.Println("READY")
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(done)
	}()
	select {
	case <-done:
	case err := <-e.Err():
		fmt.Fprintln(os.Stderr, "etcd member: failed:", err)
		e.Close()
		return 1
	}
	e.Close()
	return 0
}

// member is a running etcd member child.
type member struct {
	cfg    memberConfig
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	exited chan struct{}
	killed bool
}

// cluster is the simulation's etcd cluster: members child processes on
// loopback.
type cluster struct {
	members []*member
	dir     string
}

// freePorts returns n distinct ports on 127.0.0.1 that were free a moment
// ago (all held open together while they are picked, so that none is
// handed out twice).
func freePorts(n int) ([]int, error) {
	var out []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}

// startCluster starts n members in child processes of exe and waits
// until every one serves clients.
func startCluster(ctx context.Context, exe, dir string, n int, electionMs uint, logs io.Writer) (*cluster, error) {
	c := &cluster{dir: dir}
	var peers []string
	ports, err := freePorts(2 * n)
	if err != nil {
		return nil, err
	}
	for i := range n {
		cp, pp := ports[2*i], ports[2*i+1]
		cfg := memberConfig{
			Name: "m" + strconv.Itoa(i), Dir: filepath.Join(dir, "m"+strconv.Itoa(i)),
			ClientURL: fmt.Sprintf("http://127.0.0.1:%d", cp), PeerURL: fmt.Sprintf("http://127.0.0.1:%d", pp),
			TickMs: 100, ElectionMs: electionMs, Quota: 8 << 30,
		}
		peers = append(peers, cfg.Name+"="+cfg.PeerURL)
		c.members = append(c.members, &member{cfg: cfg})
	}
	errs := make(chan error, n)
	for _, m := range c.members {
		m.cfg.InitialCluster = strings.Join(peers, ",")
		go func() { errs <- m.start(ctx, exe, logs) }()
	}
	var all []error
	for range n {
		all = append(all, <-errs)
	}
	if err := errors.Join(all...); err != nil {
		c.stop()
		return nil, err
	}
	return c, nil
}

func (m *member) start(ctx context.Context, exe string, logs io.Writer) error {
	raw, err := json.Marshal(m.cfg)
	if err != nil {
		return err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), envMember+"="+string(raw))
	cmd.Stderr = logs
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if m.stdin, err = cmd.StdinPipe(); err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start etcd member %s: %w", m.cfg.Name, err)
	}
	m.cmd = cmd
	m.exited = make(chan struct{})
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if sc.Text() == "READY" {
				close(ready)
			}
		}
		_ = cmd.Wait()
		close(m.exited)
	}()
	select {
	case <-ready:
		return nil
	case <-m.exited:
		return fmt.Errorf("etcd member %s exited while starting", m.cfg.Name)
	case <-ctx.Done():
		m.kill()
		return ctx.Err()
	case <-time.After(2 * time.Minute):
		m.kill()
		return fmt.Errorf("etcd member %s: not ready after 2m", m.cfg.Name)
	}
}

func (m *member) pid() int { return m.cmd.Process.Pid }

// kill ends the member with SIGKILL, as a crash.
func (m *member) kill() {
	if m.cmd == nil || m.killed {
		return
	}
	m.killed = true
	_ = m.cmd.Process.Signal(syscall.SIGKILL)
	<-m.exited
}

// stop ends every member that still runs, gracefully, SIGKILL after 30s.
func (c *cluster) stop() {
	for _, m := range c.members {
		if m.cmd == nil || m.killed {
			continue
		}
		_ = m.stdin.Close()
	}
	for _, m := range c.members {
		if m.cmd == nil || m.killed {
			continue
		}
		select {
		case <-m.exited:
		case <-time.After(30 * time.Second):
			m.kill()
		}
	}
}

// endpoints returns the client URLs of every member.
func (c *cluster) endpoints() []string {
	var out []string
	for _, m := range c.members {
		out = append(out, m.cfg.ClientURL)
	}
	return out
}

// client returns a client of the cluster for the runner.
func (c *cluster) client() (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{Endpoints: c.endpoints(), DialTimeout: 10 * time.Second, Logger: zap.NewNop(),
		MaxCallRecvMsgSize: 256 << 20})
}

// leader returns the index of the member that leads, -1 if none answers.
func (c *cluster) leader(ctx context.Context, cli *clientv3.Client) int {
	for i, m := range c.members {
		if m.killed {
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		st, err := cli.Status(sctx, m.cfg.ClientURL)
		cancel()
		if err == nil && st.Leader == st.Header.MemberId {
			return i
		}
	}
	return -1
}

// memberStatus is what one member reports about itself at the end.
type memberStatus struct {
	DBSize, DBSizeInUse int64
	RaftTerm            uint64
	Leader              bool
}

func (c *cluster) status(ctx context.Context, cli *clientv3.Client) []memberStatus {
	out := make([]memberStatus, len(c.members))
	for i, m := range c.members {
		if m.killed {
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		st, err := cli.Status(sctx, m.cfg.ClientURL)
		cancel()
		if err == nil {
			out[i] = memberStatus{DBSize: st.DbSize, DBSizeInUse: st.DbSizeInUse, RaftTerm: st.RaftTerm, Leader: st.Leader == st.Header.MemberId}
		}
	}
	return out
}
