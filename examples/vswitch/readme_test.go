package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vswitchkit/vswitchkit/embedetcd"
)

// readmeCommands returns the daemon's command lines in a README's code
// blocks (indented or fenced), continuation lines joined, and fails for a
// backslash that does not end its line: pasted into a shell it escapes the
// blank after it instead of continuing the command (issue 27, item 8: the
// README's "\    # comment" broke the command).
func readmeCommands(t *testing.T, path string) [][]string {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	var cmds [][]string
	var cur string
	for i, line := range strings.Split(string(raw), "\n") {
		code := strings.TrimLeft(line, " ")
		if j := strings.Index(code, `\`); j >= 0 && j != len(code)-1 && strings.HasPrefix(line, "    ") && !strings.Contains(code, "`") {
			t.Errorf(`%s:%d: a backslash inside a command line, not at its end: %q`, path, i+1, line)
		}
		if cur != "" {
			cur += " " + strings.TrimSuffix(code, `\`)
		} else if m := regexp.MustCompile(`^(vswitch|go run \./examples/vswitch) -`).FindString(code); m != "" {
			cur = strings.TrimSuffix(code, `\`)
		}
		if cur != "" && !strings.HasSuffix(code, `\`) {
			cur = strings.TrimPrefix(strings.TrimPrefix(cur, "go run ./examples/vswitch"), "vswitch")
			if c, _, _ := strings.Cut(cur, "#"); !strings.Contains(c, "-config") {
				cmds = append(cmds, strings.Fields(c))
			}
			cur = ""
		}
	}
	return cmds
}

// TestREADMECommands: the commands that run the daemon without VPP and
// without root in the READMEs paste and work: the daemon gets ready with
// their flags (its etcd, state and HTTP address moved to this test's).
func TestREADMECommands(t *testing.T) {
	etcd, err := embedetcd.Start(context.Background(), embedetcd.Config{UnsafeNoFsync: true})
	require.NoError(t, err)
	t.Cleanup(func() { etcd.Close() })
	n := 0
	for _, readme := range []string{"../../README.md", "README.md"} {
		for _, args := range readmeCommands(t, readme) {
			n++
			t.Run(strings.Join(args, " "), func(t *testing.T) {
				dir := shortDir(t)
				for i, a := range args {
					for _, p := range []string{"/tmp/vsk-state", "/tmp/vsk"} {
						if strings.HasPrefix(a, p+"/") || a == p {
							args[i] = filepath.Join(dir, strings.TrimPrefix(a, p))
							break
						}
					}
				}
				d := startDaemon(t, append(args, "-etcd-endpoints", etcd.Endpoints()[0], "-http-listen", "127.0.0.1:0", "-log-format", "json")...)
				d.waitReady()
				assert.Equal(t, 0, d.stop())
			})
		}
	}
	assert.Equal(t, 2, n, "the commands of both READMEs")
}
