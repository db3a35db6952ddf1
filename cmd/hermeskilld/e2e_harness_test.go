// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/certs"
)

// Helpers of the end-to-end tests (reported_test.go,
// clients_test.go, containment_test.go, pid1_test.go). They run the test
// binary as hermeskilld, as hk does, with extra environment, and can
// start it in the background for handshakes with the agent.

// command prepares argv (hermeskilld, or a wrapper that runs it) with
// extra environment; it is killed if a test overruns.
func command(t *testing.T, env []string, argv ...string) *exec.Cmd {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(append(os.Environ(), asMain+"=1"), env...)
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// hkRun runs hermeskilld to its end.
func hkRun(t *testing.T, env []string, args ...string) result {
	t.Helper()
	h := hkStart(t, env, args...)
	return h.wait(t)
}

// clientEnv lets Python agents `import hermeskill`.
func clientEnv(t *testing.T) []string {
	t.Helper()
	dir, err := filepath.Abs("../../clients/python")
	require.NoError(t, err)
	require.FileExists(t, filepath.Join(dir, "hermeskill.py"))
	return []string{"PYTHONPATH=" + dir}
}

// running is a hermeskilld started in the background whose stdout (the
// agent's, passed through) is read line by line for handshakes.
type running struct {
	cmd    *exec.Cmd
	began  time.Time
	lines  chan string
	stdout lockedBuffer
	stderr lockedBuffer
	copied chan struct{}
}

// lockedBuffer is a bytes.Buffer safe for one writer and concurrent readers.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// hkStart starts hermeskilld with args.
func hkStart(t *testing.T, env []string, args ...string) *running {
	t.Helper()
	return startArgv(t, env, append([]string{os.Args[0]}, args...)...)
}

// startArgv starts argv, hermeskilld or a wrapper of it. Its stdout goes
// through a pipe of ours, so waiting for the process never races with
// reading it.
func startArgv(t *testing.T, env []string, argv ...string) *running {
	t.Helper()
	return startCmd(t, command(t, env, argv...))
}

// startCmd is startArgv for a command prepared by command (and then
// given, say, credentials).
func startCmd(t *testing.T, cmd *exec.Cmd) *running {
	t.Helper()
	pr, pw, err := os.Pipe()
	require.NoError(t, err)
	h := &running{cmd: cmd, lines: make(chan string, 1024), copied: make(chan struct{})}
	cmd.Stdout = pw
	cmd.Stderr = &h.stderr
	h.began = time.Now()
	err = cmd.Start()
	pw.Close()
	if err != nil {
		pr.Close()
		require.NoError(t, err)
	}
	go func() {
		defer close(h.copied)
		defer close(h.lines)
		defer pr.Close()
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			h.stdout.Write(append(sc.Bytes(), '\n'))
			select {
			case h.lines <- sc.Text():
			default: // nobody waits for lines this late; stdout keeps them
			}
		}
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return h
}

// expect waits for the next stdout line matching re and returns its
// submatches; lines before it are skipped.
func (h *running) expect(t *testing.T, re string) []string {
	t.Helper()
	rx := regexp.MustCompile(re)
	timeout := time.NewTimer(60 * time.Second)
	defer timeout.Stop()
	for {
		select {
		case line, ok := <-h.lines:
			if !ok {
				require.FailNowf(t, "agent output ended", "no line matching %q; stderr:\n%s", re, h.stderr.String())
			}
			if m := rx.FindStringSubmatch(line); m != nil {
				return m
			}
		case <-timeout.C:
			require.FailNowf(t, "no handshake", "no line matching %q within 60s; stderr:\n%s", re, h.stderr.String())
		}
	}
}

// wait waits for hermeskilld to exit.
func (h *running) wait(t *testing.T) result {
	t.Helper()
	err := h.cmd.Wait()
	<-h.copied
	r := result{code: h.cmd.ProcessState.ExitCode(), stdout: h.stdout.String(), stderr: h.stderr.String(), took: time.Since(h.began)}
	if err != nil {
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee, "hermeskilld did not run: %v", err)
	}
	t.Logf("%s -> %d in %s\nstderr:\n%s", strings.Join(h.cmd.Args, " "), r.code, r.took, r.stderr)
	return r
}

// readCert is the one certificate in dir, decoded by the certs package.
func readCert(t *testing.T, dir string) *certs.Certificate {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	require.NoError(t, err)
	require.Len(t, files, 1, "want exactly one certificate in %s", dir)
	var c certs.Certificate
	require.NoError(t, json.Unmarshal(mustRead(t, files[0]), &c))
	require.Equal(t, certs.Schema, c.Schema)
	return &c
}

// stepNames lists the shutdown_log's steps.
func stepNames(c *certs.Certificate) []string {
	var names []string
	for _, s := range c.ShutdownLog {
		names = append(names, s.Step)
	}
	return names
}

// symptomsOf lists the symptoms_log as "severity check" strings.
func symptomsOf(c *certs.Certificate) []string {
	var out []string
	for _, s := range c.SymptomsLog {
		out = append(out, s.Severity+" "+s.Check)
	}
	return out
}

// treeProc is the process_tree entry of pid.
func treeProc(t *testing.T, c *certs.Certificate, pid int) certs.Proc {
	t.Helper()
	for _, p := range c.ProcessTree {
		if p.PID == pid {
			return p
		}
	}
	require.FailNowf(t, "not in process_tree", "pid %d is not in the certificate's process_tree: %+v", pid, c.ProcessTree)
	return certs.Proc{}
}

// procStat reads a process's state and parent from /proc/PID/stat; ok is
// false once the pid is gone (reaped).
func procStat(pid int) (state byte, ppid int, ok bool) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, false
	}
	i := bytes.LastIndexByte(data, ')')
	if i < 0 || i+2 >= len(data) {
		return 0, 0, false
	}
	f := strings.Fields(string(data[i+2:]))
	if len(f) < 2 {
		return 0, 0, false
	}
	ppid, _ = strconv.Atoi(f[1])
	return f[0][0], ppid, true
}

// pidAlive reports whether pid runs (a zombie does not).
func pidAlive(pid int) bool {
	st, _, ok := procStat(pid)
	return ok && st != 'Z' && st != 'X'
}

// childrenOf lists the pids whose parent is ppid, with their states.
func childrenOf(ppid int) map[int]byte {
	out := make(map[int]byte)
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, parent, ok := procStat(pid); ok && parent == ppid {
			out[pid] = st
		}
	}
	return out
}

// killAtEnd SIGKILLs pid when the test ends, in case an assertion failed
// before the pid was dead (a leftover would disturb the next tests).
func killAtEnd(t *testing.T, pid int) {
	t.Cleanup(func() {
		if pidAlive(pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
}

// writeTestFile writes a file for the test (agent files, agent sources).
func writeTestFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	return p
}
