package envelope

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/vswitchkit/vswitchkit/examples/scale/internal/agentproc"
)

// child is a running agent child process.
type child struct {
	cmd     *exec.Cmd
	started time.Time // just before the process was started
	cmds    *os.File
	reports chan agentproc.Report
	exited  chan struct{} // closed when the process has exited
	waitErr error         // set before exited is closed
	nextID  int
}

// startChild starts exe as the agent child with cfg; its output goes to
// logs.
func startChild(exe string, cfg agentproc.Config, logs io.Writer) (*child, error) {
	env, err := agentproc.EncodeConfig(cfg)
	if err != nil {
		return nil, err
	}
	cmdR, cmdW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	repR, repW, err := os.Pipe()
	if err != nil {
		cmdR.Close()
		cmdW.Close()
		return nil, err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), env)
	cmd.ExtraFiles = []*os.File{cmdR, repW} // fds 3 and 4
	cmd.Stdout, cmd.Stderr = logs, logs
	c := &child{cmd: cmd, cmds: cmdW, reports: make(chan agentproc.Report, 16), exited: make(chan struct{})}
	c.started = time.Now()
	err = cmd.Start()
	cmdR.Close()
	repW.Close()
	if err != nil {
		cmdW.Close()
		repR.Close()
		return nil, fmt.Errorf("start agent child: %w", err)
	}
	go func() {
		defer close(c.reports)
		sc := bufio.NewScanner(repR)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			var r agentproc.Report
			if json.Unmarshal(sc.Bytes(), &r) == nil {
				c.reports <- r
			}
		}
		repR.Close()
	}()
	go func() {
		c.waitErr = cmd.Wait()
		close(c.exited)
	}()
	return c, nil
}

// next returns the next report, failing after timeout, when ctx ends, or
// when the child reports an error or exits.
func (c *child) next(ctx context.Context, timeout time.Duration) (agentproc.Report, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case r, ok := <-c.reports:
		if !ok {
			<-c.exited
			return r, fmt.Errorf("agent child exited: %v", c.waitErr)
		}
		if r.Type == "error" {
			return r, fmt.Errorf("agent child: %s", r.Err)
		}
		return r, nil
	case <-t.C:
		return agentproc.Report{}, fmt.Errorf("no report from the agent child within %v", timeout)
	case <-ctx.Done():
		return agentproc.Report{}, ctx.Err()
	}
}

// expect returns the next report, which must be of type typ (and, for
// probe reports, of probe id).
func (c *child) expect(ctx context.Context, timeout time.Duration, typ string, id int) (agentproc.Report, error) {
	r, err := c.next(ctx, timeout)
	if err != nil {
		return r, err
	}
	if r.Type != typ || r.ID != id {
		return r, fmt.Errorf("agent child: got report %s/%d, want %s/%d", r.Type, r.ID, typ, id)
	}
	return r, nil
}

func (c *child) send(cmd agentproc.Command) error {
	raw, err := json.Marshal(cmd)
	if err != nil {
		return err
	}
	if _, err := c.cmds.Write(append(raw, '\n')); err != nil {
		return fmt.Errorf("command to the agent child: %w", err)
	}
	return nil
}

// probeTimeout bounds the wait for one change to reach the stand-in.
const probeTimeout = 60 * time.Second

// probe arms a probe for the requests want and runs change; it returns
// the time just before change and the time the stand-in received the last
// of the requests.
func (c *child) probe(ctx context.Context, want []string, change func() error) (start, seen time.Time, err error) {
	c.nextID++
	id := c.nextID
	if err := c.send(agentproc.Command{Op: "probe", ID: id, Want: want}); err != nil {
		return start, seen, err
	}
	if _, err := c.expect(ctx, probeTimeout, "armed", id); err != nil {
		return start, seen, err
	}
	start = time.Now()
	if err := change(); err != nil {
		return start, seen, err
	}
	r, err := c.expect(ctx, probeTimeout, "seen", id)
	if err != nil {
		return start, seen, fmt.Errorf("waiting for %v: %w", want, err)
	}
	return start, time.Unix(0, r.At), nil
}

// latency is probe's time from the change to the stand-in.
func (c *child) latency(ctx context.Context, want []string, change func() error) (time.Duration, error) {
	start, seen, err := c.probe(ctx, want, change)
	return seen.Sub(start), err
}

// stats asks the child for its counters.
func (c *child) stats(ctx context.Context) (agentproc.Stats, error) {
	if err := c.send(agentproc.Command{Op: "stats"}); err != nil {
		return agentproc.Stats{}, err
	}
	r, err := c.expect(ctx, time.Minute, "stats", 0)
	if err != nil {
		return agentproc.Stats{}, err
	}
	return *r.Stats, nil
}

// stop asks the child to quit and waits for it; it kills a child that
// does not exit within a minute.
func (c *child) stop() error {
	_ = c.send(agentproc.Command{Op: "quit"})
	c.cmds.Close()
	select {
	case <-c.exited:
	case <-time.After(time.Minute):
		_ = c.cmd.Process.Signal(syscall.SIGKILL)
		<-c.exited
		return errors.New("agent child did not stop within a minute; killed")
	}
	for range c.reports { // drain
	}
	if c.waitErr != nil {
		return fmt.Errorf("agent child: %w", c.waitErr)
	}
	return nil
}

// events asks the child how long its loop took for the events since the
// last call.
func (c *child) events(ctx context.Context) ([]agentproc.Events, error) {
	if err := c.send(agentproc.Command{Op: "events"}); err != nil {
		return nil, err
	}
	r, err := c.expect(ctx, time.Minute, "events", 0)
	return r.Events, err
}
