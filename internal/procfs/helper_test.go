// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package procfs

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// The tests of real processes re-execute the test binary as the child, as
// os/exec's tests do: with helperEnv set, TestMain runs the helper named by
// the first argument instead of the tests.
const helperEnv = "HERMESKILL_PROCFS_TEST_HELPER"

// helpers run in the child. Each one signals that it is ready by writing
// what the test needs to know to stdout and closing it, then runs until its
// stdin is closed.
var helpers = map[string]func(args []string) error{
	// open-files N: open N more files, then wait.
	"open-files": func(args []string) error {
		n, err := strconv.Atoi(args[0])
		if err != nil {
			return err
		}
		for range n {
			// unix.Open, not os.Open: the Go poller must not add fds of
			// its own in one helper and not the other.
			if _, err := unix.Open("/dev/null", unix.O_RDONLY, 0); err != nil {
				return err
			}
		}
		return readyAndWait("")
	},
	// fork-grandchild: start "open-files 0" in a new session, as an agent
	// that tries to escape its process group would; say its pid, wait,
	// then reap it.
	"fork-grandchild": func([]string) error {
		gc := exec.Command(os.Args[0], "open-files", "0")
		gc.Env = os.Environ()
		gc.Stdin = os.Stdin // both see EOF when the test closes the pipe
		gc.Stderr = os.Stderr
		gc.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		out, err := gc.StdoutPipe()
		if err != nil {
			return err
		}
		if err := gc.Start(); err != nil {
			return err
		}
		if _, err := io.ReadAll(out); err != nil { // its handshake
			return err
		}
		if err := readyAndWait(strconv.Itoa(gc.Process.Pid)); err != nil {
			return err
		}
		return gc.Wait()
	},
	// undumpable keep-fds|no-fds: make ourselves non-dumpable
	// (prctl(2) PR_SET_DUMPABLE 0), so that our /proc/PID/fd is
	// another uid's to read only with CAP_SYS_PTRACE, then wait. With
	// no-fds, close every descriptor once ready (the readiness is the
	// end of stdout) and wait for SIGKILL: a process with none, whose fd
	// directory reports a size of 0, so that a count must list it.
	"undumpable": func(args []string) error {
		if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
			return os.NewSyscallError("prctl", err)
		}
		if args[0] != "no-fds" {
			return readyAndWait("")
		}
		// Raw closes, of descriptors the runtime does not use: no file
		// went through its poller, and GODEBUG=containermaxprocs=0
		// (startChild's caller) keeps it from holding the cgroup's CPU
		// limit files open. Stdout last: its end is the readiness.
		if err := unix.CloseRange(3, math.MaxUint32, 0); err != nil {
			return os.NewSyscallError("close_range", err)
		}
		for _, fd := range []int{0, 2, 1} {
			unix.Close(fd)
		}
		for {
			unix.Pause()
		}
	},
}

func readyAndWait(say string) error {
	if _, err := io.WriteString(os.Stdout, say); err != nil {
		return err
	}
	if err := os.Stdout.Close(); err != nil {
		return err
	}
	_, err := io.Copy(io.Discard, os.Stdin)
	return err
}

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		os.Exit(runHelper(os.Args[1:]))
	}
	os.Exit(m.Run())
}

func runHelper(args []string) int {
	if len(args) == 0 || helpers[args[0]] == nil {
		fmt.Fprintf(os.Stderr, "helper: unknown command %q\n", args)
		return 2
	}
	if err := helpers[args[0]](args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "helper %s: %v\n", args[0], err)
		return 1
	}
	return 0
}

// child is a running helper.
type child struct {
	t     testing.TB
	cmd   *exec.Cmd
	stdin io.WriteCloser
	pid   int
	said  string // what the helper wrote before closing stdout

	waitOnce sync.Once
	waitErr  error
}

// startChild starts a helper and returns once it is ready. It is stopped
// and reaped when the test ends, if the test did not do it.
func startChild(t testing.TB, attr *syscall.SysProcAttr, env []string, args ...string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(append(os.Environ(), helperEnv+"=1"), env...)
	cmd.SysProcAttr = attr
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	c := &child{t: t, cmd: cmd, stdin: stdin, pid: cmd.Process.Pid}
	t.Cleanup(func() {
		c.stdin.Close()
		c.wait()
	})

	said, err := io.ReadAll(bufio.NewReader(stdout))
	require.NoError(t, err)
	c.said = strings.TrimSpace(string(said))
	return c
}

// stop closes the helper's stdin, which makes it (and its grandchild) exit.
func (c *child) stop() { require.NoError(c.t, c.stdin.Close()) }

// wait reaps the helper.
func (c *child) wait() error {
	c.waitOnce.Do(func() { c.waitErr = c.cmd.Wait() })
	return c.waitErr
}
