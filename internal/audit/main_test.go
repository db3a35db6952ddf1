// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package audit

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"golang.org/x/sys/unix"
)

// helperEnv names the helper the test binary runs instead of the tests, as os/exec's tests
// do: the binary re-executed is a second real process appending to the same file.
const helperEnv = "HERMESKILL_AUDIT_HELPER"

var helpers = map[string]func(args ...string) int{
	// append PATH WRITER N: open PATH (rotating past MaxBytes when given as a fourth
	// argument), say "ready" on stdout, wait for stdin to close, then append N events.
	"append": helperAppend,
	// short-write PATH LIMIT: open PATH, set RLIMIT_FSIZE to LIMIT bytes, append a line that
	// crosses it, and exit 0 when Append failed with EFBIG. The kernel writes what fits, then
	// refuses: the short write a full disk causes.
	"short-write": helperShortWrite,
}

func TestMain(m *testing.M) {
	if name := os.Getenv(helperEnv); name != "" {
		os.Exit(helpers[name](os.Args[1:]...))
	}
	goleak.VerifyTestMain(m)
}

func helperAppend(args ...string) int {
	n, _ := strconv.Atoi(args[2])
	var opts Options
	if len(args) > 3 {
		opts.MaxBytes, _ = strconv.ParseInt(args[3], 10, 64)
		opts.Keep = 1000
	}
	l, err := Open(args[0], opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("ready")
	io.Copy(io.Discard, os.Stdin) // the parent closes stdin to start everyone at once
	for i := range n {
		if err := l.Append(writerEvent(args[1], i)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	if err := l.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

func helperShortWrite(args ...string) int {
	limit, _ := strconv.ParseUint(args[1], 10, 64)
	l, err := Open(args[0], Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer l.Close()
	// Go ignores SIGXFSZ, so the write returns EFBIG instead of killing the process.
	if err := unix.Setrlimit(unix.RLIMIT_FSIZE, &unix.Rlimit{Cur: limit, Max: limit}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	err = l.Append(Event{Type: "symptom", Data: strings.Repeat("x", 2000)})
	if !errors.Is(err, unix.EFBIG) {
		fmt.Fprintln(os.Stderr, "want EFBIG, got", err)
		return 1
	}
	return 0
}

// writerEvent is event i of writer w, so a test can count what each writer got in.
func writerEvent(w string, i int) Event {
	return Event{Type: "symptom", AgentID: w, Data: map[string]int{"i": i}}
}

// appender is a helper process running "append".
type appender struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
}

// startAppender starts the helper and returns once it has opened the log.
func startAppender(t *testing.T, args ...string) *appender {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), helperEnv+"=append")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		stdin.Close()
		t.Fatalf("helper %v: %v (%v)", args, err, cmd.Wait())
	}
	require.Equal(t, "ready\n", line)
	return &appender{cmd: cmd, stdin: stdin}
}

// release lets the helper append.
func (a *appender) release(t *testing.T) {
	t.Helper()
	require.NoError(t, a.stdin.Close())
}

// wait waits for the helper to exit, successfully.
func (a *appender) wait(t *testing.T) {
	t.Helper()
	require.NoError(t, a.cmd.Wait())
}
