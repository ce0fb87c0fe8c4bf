package gobgp

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"
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
type speakerProcess struct{ testPeer }

func startSpeaker(t testing.TB) *speakerProcess {
	t.Helper()
	s := &speakerProcess{}
	s.start(t, speakerEnv+"=1", nil)
	return s
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
