package gobgp

import (
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
	"github.com/vswitchkit/vswitchkit/bgp/gobgp/gobgptest"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
)

// speakerEnv makes the test binary a speaker process: a Manager driven by
// commands on stdin (see runSpeakerProcess), so that a test can kill it
// with SIGKILL like a crashing agent.
const speakerEnv = "VSWITCHKIT_GOBGP_TEST_SPEAKER"

// speakerSpec is one ConfigurePeers call (or, with Spec, ApplySpec), as
// JSON on the speaker's stdin.
type speakerSpec struct {
	Policy   *bgp.PeeringPolicy
	Spec     *bgp.NodeSpec
	PodCIDRs []string
	IPv4     netip.Addr
	IPv6     netip.Addr
}

// speakerProcess is a Manager in a child process.
type speakerProcess struct {
	*gobgptest.Child
}

func startSpeaker(t testing.TB) *speakerProcess {
	t.Helper()
	s := &speakerProcess{gobgptest.StartChild(t, speakerEnv+"=1")}
	_, err := s.Do("ping")
	require.NoError(t, err, "speaker process did not start")
	return s
}

// apply calls ConfigurePeers in the child.
func (s *speakerProcess) apply(t testing.TB, spec speakerSpec) {
	t.Helper()
	b, err := json.Marshal(spec)
	require.NoError(t, err)
	_, err = s.Do("apply", string(b))
	require.NoError(t, err)
}

// learned returns the manager's learned routes in the child.
func (s *speakerProcess) learned(t testing.TB) []bgp.LearnedRoute {
	t.Helper()
	rep, err := s.Do("learned")
	require.NoError(t, err)
	var out []bgp.LearnedRoute
	require.NoError(t, json.Unmarshal([]byte(rep), &out))
	return out
}

// kill kills the child with SIGKILL: no withdrawal, no NOTIFICATION; the
// kernel closes its sockets.
func (s *speakerProcess) kill(t testing.TB) {
	t.Helper()
	require.NoError(t, s.Cmd.Process.Signal(syscall.SIGKILL))
	_ = s.Cmd.Wait()
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
	gobgptest.ServeLines(os.Stdin, os.Stdout, func(line string) (string, error) {
		cmd, arg, _ := strings.Cut(line, " ")
		return speakerCommand(ctx, m, cmd, arg)
	})
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
			var err error
			if spec.Spec != nil {
				err = m.ApplySpec(ctx, spec.Spec, state)
			} else {
				err = m.ConfigurePeers(ctx, spec.Policy, state)
			}
			if !errors.Is(err, ErrNotRunning) {
				return "", err
			}
			time.Sleep(time.Millisecond)
		}
	case "learned":
		b, err := json.Marshal(m.LearnedRoutes())
		return string(b), err
	}
	return "", fmt.Errorf("unknown command %q", cmd)
}
