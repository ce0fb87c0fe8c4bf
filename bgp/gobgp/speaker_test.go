package gobgp

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/vswitchkit/vswitchkit/bgp"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
)

// speakerEnv makes the test binary a speaker process: a Manager driven by
// commands on stdin (see runSpeakerProcess), so that a test can kill it
// with SIGKILL like a crashing agent.
const speakerEnv = "VSWITCHKIT_GOBGP_TEST_SPEAKER"

// speakerSpec is one ConfigurePeers call, as JSON on the speaker's stdin.
type speakerSpec struct {
	Policy   *bgp.PeeringPolicy
	PodCIDRs []string
	IPv4     netip.Addr
	IPv6     netip.Addr
}

// speakerProcess is a Manager in a child process.
type speakerProcess struct {
	mu  sync.Mutex // serializes commands
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

func startSpeaker(t testing.TB) *speakerProcess {
	t.Helper()
	s := &speakerProcess{cmd: exec.Command(os.Args[0], "-test.run=^$")}
	s.cmd.Env = append(os.Environ(), speakerEnv+"=1")
	s.cmd.Stderr = os.Stderr
	var err error
	s.in, err = s.cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := s.cmd.StdoutPipe()
	require.NoError(t, err)
	s.out = bufio.NewReader(stdout)
	require.NoError(t, s.cmd.Start())
	t.Cleanup(func() {
		s.in.Close() // the child stops its manager and exits on EOF
		_ = s.cmd.Wait()
	})
	_, err = s.do("ping")
	require.NoError(t, err, "speaker process did not start")
	return s
}

// do sends one command line and returns the reply after "ok".
func (s *speakerProcess) do(args ...string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := fmt.Fprintln(s.in, strings.Join(args, " ")); err != nil {
		return "", err
	}
	line, err := s.out.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSpace(line)
	if rest, ok := strings.CutPrefix(line, "ok"); ok {
		return strings.TrimSpace(rest), nil
	}
	return "", errors.New(line)
}

// apply calls ConfigurePeers in the child.
func (s *speakerProcess) apply(t testing.TB, spec speakerSpec) {
	t.Helper()
	b, err := json.Marshal(spec)
	require.NoError(t, err)
	_, err = s.do("apply", string(b))
	require.NoError(t, err)
}

// kill kills the child with SIGKILL: no withdrawal, no NOTIFICATION; the
// kernel closes its sockets.
func (s *speakerProcess) kill(t testing.TB) {
	t.Helper()
	require.NoError(t, s.cmd.Process.Signal(syscall.SIGKILL))
	_ = s.cmd.Wait()
}

func runSpeakerProcess() int {
	m, err := New(Config{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(nil, 1<<20)
	for in.Scan() {
		cmd, arg, _ := strings.Cut(in.Text(), " ")
		reply, err := speakerCommand(ctx, m, cmd, arg)
		if err != nil {
			fmt.Printf("err %v\n", strings.ReplaceAll(err.Error(), "\n", "; "))
			continue
		}
		fmt.Printf("ok %s\n", reply)
	}
	return 0
}

func speakerCommand(ctx context.Context, m *Manager, cmd, arg string) (string, error) {
	switch cmd {
	case "ping":
		return "pong", nil
	case "apply":
		var spec speakerSpec
		if err := json.Unmarshal([]byte(arg), &spec); err != nil {
			return "", err
		}
		state := &bgp.ControlPlaneState{Node: &kubemodel.Node{Name: "speaker", PodCidrs: spec.PodCIDRs}}
		if spec.IPv4.IsValid() {
			state.IPv4 = spec.IPv4.AsSlice()
		}
		if spec.IPv6.IsValid() {
			state.IPv6 = spec.IPv6.AsSlice()
		}
		// ConfigurePeers may be called before Run has marked the manager
		// running.
		for {
			err := m.ConfigurePeers(ctx, spec.Policy, state)
			if !errors.Is(err, ErrNotRunning) {
				return "", err
			}
			time.Sleep(time.Millisecond)
		}
	}
	return "", fmt.Errorf("unknown command %q", cmd)
}
