// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/hermeskill/hermeskilld/internal/procfs"
)

// End-to-end tests of an interactive agent under supervise: a pseudo-
// terminal whose slave is the controlling terminal of a new session, in
// which a shell runs hermeskilld — sh without job control, or an
// interactive bash with it — and the test types into the master.

// pty is a pseudo-terminal: the test's end (master) and the session's
// (slave), with everything the session wrote.
type pty struct {
	master, slave *os.File
	out           lockedBuffer
	read          chan struct{} // closed when the master reads EOF/EIO
	seen          int           // offset of the output already matched
}

// openPTY opens a pseudo-terminal (posix_openpt, unlockpt, ptsname).
func openPTY(t *testing.T) *pty {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	require.NoError(t, err)
	t.Cleanup(func() { master.Close() })
	fd := int(master.Fd())
	require.NoError(t, unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0), "unlockpt")
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	require.NoError(t, err, "ptsname")
	slave, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	require.NoError(t, err)
	t.Cleanup(func() { slave.Close() })
	p := &pty{master: master, slave: slave, read: make(chan struct{})}
	go func() {
		defer close(p.read)
		buf := make([]byte, 4096)
		for {
			n, err := master.Read(buf)
			p.out.Write(buf[:n])
			if err != nil {
				return
			}
		}
	}()
	return p
}

// start runs argv in a new session whose controlling terminal is the
// slave, on its stdin, stdout and stderr, with hermeskilld's environment.
func (p *pty) start(t *testing.T, env []string, argv ...string) *exec.Cmd {
	t.Helper()
	cmd := command(t, append([]string{"TERM=dumb", "PS1=$ ", "HISTFILE=/dev/null"}, env...), argv...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = p.slave, p.slave, p.slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			_ = cmd.Wait()
		}
	})
	return cmd
}

// expect waits for output matching re after what was matched before,
// and returns its submatches.
func (p *pty) expect(t *testing.T, re string) []string {
	t.Helper()
	rx := regexp.MustCompile(re)
	deadline := time.Now().Add(30 * time.Second)
	for {
		out := p.out.String()
		if loc := rx.FindStringSubmatchIndex(out[p.seen:]); loc != nil {
			m := make([]string, len(loc)/2)
			for i := range m {
				if loc[2*i] >= 0 {
					m[i] = out[p.seen+loc[2*i] : p.seen+loc[2*i+1]]
				}
			}
			p.seen += loc[1]
			return m
		}
		if time.Now().After(deadline) {
			require.FailNowf(t, "terminal", "no output matching %q within 30s; the terminal shows:\n%s", re, out)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// typ types s into the terminal.
func (p *pty) typ(t *testing.T, s string) {
	t.Helper()
	_, err := p.master.WriteString(s)
	require.NoError(t, err)
}

// foreground is the terminal's foreground process group (tcgetpgrp, asked
// on the master: the slave is not the test's controlling terminal).
func (p *pty) foreground(t *testing.T) int {
	t.Helper()
	pg, err := unix.IoctlGetInt(int(p.master.Fd()), unix.TIOCGPGRP)
	require.NoError(t, err)
	return pg
}

// lflag is the terminal's local modes (ECHO, ICANON, ISIG, …).
func (p *pty) lflag(t *testing.T) uint32 {
	t.Helper()
	tio, err := unix.IoctlGetTermios(int(p.slave.Fd()), unix.TCGETS)
	require.NoError(t, err)
	return tio.Lflag
}

// underSh runs `hermeskilld supervise ARGS` from sh -c in a new session:
// a shell without job control, as tmux or a container's terminal runs a
// command; sh prints hermeskilld's status and waits for a line.
func underSh(t *testing.T, p *pty, args ...string) *exec.Cmd {
	t.Helper()
	script := `"$0" "$@"; echo "RC=$?"; read x`
	return p.start(t, nil, append([]string{"/bin/sh", "-c", script, os.Args[0], "supervise"}, args...)...)
}

// The agent reads what is typed; the terminal's Ctrl-Z and Ctrl-C are the
// agent's: with no job control above hermeskilld a stop is continued at
// once, and a Ctrl-C the agent handles is no kill of hermeskilld's (no
// certificate, its exit status).
func TestSuperviseTerminalIsTheAgents(t *testing.T) {
	dir := t.TempDir()
	p := openPTY(t)
	sh := underSh(t, p, "--certs-dir", dir, "--", python(t), agent(t, dir, `
import os, signal, sys
def interrupted(sig, frame):
    print("GOT-SIGINT", flush=True)
    sys.exit(0)
signal.signal(signal.SIGINT, interrupted)
print("FG=%d OWN=%d pid=%d" % (os.tcgetpgrp(0) == os.getpgrp(), os.getpgrp() == os.getpid(), os.getpid()), flush=True)
print("QUESTION1?", flush=True)
print("got1=%r" % sys.stdin.readline(), flush=True)
print("QUESTION2?", flush=True)
print("got2=%r" % sys.stdin.readline(), flush=True)
signal.pause()
`))
	agentPID, err := strconv.Atoi(p.expect(t, `FG=1 OWN=1 pid=(\d+)`)[1])
	require.NoError(t, err)
	p.expect(t, `QUESTION1\?`)
	p.typ(t, "typed-answer\n")
	p.expect(t, `got1='typed-answer\\n'`)
	p.expect(t, `QUESTION2\?`)
	p.typ(t, "\x1a") // Ctrl-Z: the agent stops, and is continued
	p.expect(t, `could continue it: it is continued`)
	// Someone's SIGSTOP is not undone: the terminal is hermeskilld's
	// until the agent is continued.
	require.NoError(t, syscall.Kill(agentPID, syscall.SIGSTOP))
	require.Eventually(t, func() bool { return p.foreground(t) == sh.Process.Pid }, 10*time.Second, 5*time.Millisecond)
	time.Sleep(100 * time.Millisecond)
	st, err := procfs.Default().Stat(agentPID)
	require.NoError(t, err)
	require.Equal(t, byte('T'), st.State, "still stopped")
	require.NoError(t, syscall.Kill(agentPID, syscall.SIGCONT))
	require.Eventually(t, func() bool { return p.foreground(t) == agentPID }, 10*time.Second, 5*time.Millisecond)
	p.typ(t, "second\n")
	p.expect(t, `got2='second\\n'`)
	p.typ(t, "\x03") // Ctrl-C
	p.expect(t, `GOT-SIGINT`)
	p.expect(t, `RC=0\b`)
	require.Equal(t, sh.Process.Pid, p.foreground(t), "the terminal is the shell's again")
	noCert(t, dir)
	p.typ(t, "\n")
	require.NoError(t, sh.Wait())
}

// However the agent ends — a check's kill, a kill of hermeskilld from
// elsewhere, a SIGKILL of the agent — the terminal is given back with its
// modes, after an agent that set it raw.
func TestSuperviseTerminalGivenBack(t *testing.T) {
	for _, tc := range []struct {
		name, flag string
		end        func(t *testing.T, agentPID, hkPID int)
		trigger    string
	}{
		{"max_runtime", "--max-runtime=1s", nil, "auto"},
		{"SIGTERM to hermeskilld", "--coop-grace=5s", func(t *testing.T, _, hkPID int) {
			require.NoError(t, syscall.Kill(hkPID, syscall.SIGTERM))
		}, "manual"},
		{"SIGKILL of the agent", "--coop-grace=5s", func(t *testing.T, agentPID, _ int) {
			require.NoError(t, syscall.Kill(agentPID, syscall.SIGKILL))
		}, "external"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			p := openPTY(t)
			modes := p.lflag(t)
			require.NotZero(t, modes&unix.ECHO)
			require.NotZero(t, modes&unix.ICANON)
			sh := underSh(t, p, "--certs-dir", dir, tc.flag, "--", python(t), agent(t, dir, `
import os, sys, tty
tty.setraw(0)
print("RAW pid=%d hk=%d\r" % (os.getpid(), os.getppid()), flush=True)
sys.stdin.read(1)
`))
			m := p.expect(t, `RAW pid=(\d+) hk=(\d+)`)
			require.Zero(t, p.lflag(t)&(unix.ECHO|unix.ICANON), "the agent's raw mode")
			agentPID, _ := strconv.Atoi(m[1])
			hkPID, _ := strconv.Atoi(m[2])
			require.Equal(t, agentPID, p.foreground(t), "the agent's group holds the terminal")
			if tc.end != nil {
				tc.end(t, agentPID, hkPID)
			}
			p.expect(t, `RC=\d+`)
			require.Equal(t, sh.Process.Pid, p.foreground(t), "the foreground group is the shell's (and hermeskilld's) again")
			require.Equal(t, modes, p.lflag(t), "the terminal's modes are restored")
			require.Equal(t, tc.trigger, cert(t, dir)["trigger_type"])
			p.typ(t, "\n")
			require.NoError(t, sh.Wait())
		})
	}
}

// Under an interactive shell with job control, hermeskilld and its agent
// are one job: Ctrl-Z stops both and gives the shell its terminal; fg gives
// the agent the terminal again, with the modes it had; a `kill` of the
// stopped job runs the ladder.
func TestSuperviseTerminalJobControl(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash not found in PATH: this test needs a shell with job control (apt-get install bash)")
	}
	dir := t.TempDir()
	p := openPTY(t)
	sh := p.start(t, nil, bash, "--norc", "--noprofile", "--noediting", "-i")
	p.expect(t, `\$ $`)
	ag := agent(t, dir, `
import os, signal, sys, termios, tty
def interrupted(sig, frame):
    print("GOT-SIGINT", flush=True)
    sys.exit(0)
signal.signal(signal.SIGINT, interrupted)
tty.setcbreak(0)  # no echo, no line editing; Ctrl-C and Ctrl-Z still signal
print("QUESTION?", flush=True)
line = sys.stdin.readline()
echo = termios.tcgetattr(0)[3] & termios.ECHO
print("got=%r echo=%d fg=%d" % (line, echo != 0, os.tcgetpgrp(0) == os.getpgrp()), flush=True)
signal.pause()
`)
	hkArgv := fmt.Sprintf("%s supervise --certs-dir %s -- %s %s", os.Args[0], dir, python(t), ag)
	run := hkArgv + "; echo RC=$?\n"
	// Run by the shell, and by a script the shell runs (hermeskilld then
	// is in the script's process group, whose parent is the shell's).
	for _, cmdline := range []string{run, "sh -c '" + hkArgv + "; true'\n"} {
		p.typ(t, cmdline)
		p.expect(t, `QUESTION\?`)
		p.typ(t, "\x1a") // Ctrl-Z
		p.expect(t, `Stopped`)
		p.expect(t, `\$ $`)
		require.Equal(t, sh.Process.Pid, p.foreground(t), "the shell has its terminal back")
		lf := p.lflag(t)
		require.NotZero(t, lf&unix.ECHO, "the shell's modes")
		p.typ(t, "fg\n")
		p.expect(t, `supervise`)
		// The agent is given the terminal, with its own modes, at SIGCONT.
		require.Eventually(t, func() bool {
			return p.foreground(t) != sh.Process.Pid && p.lflag(t)&unix.ECHO == 0
		}, 10*time.Second, 5*time.Millisecond, "the agent has the terminal again, in its own modes")
		p.typ(t, "after-fg\n")
		p.expect(t, `got='after-fg\\n' echo=0 fg=1`)
		p.typ(t, "\x03") // Ctrl-C
		p.expect(t, `GOT-SIGINT`)
		p.expect(t, `\$ $`)
		require.Equal(t, sh.Process.Pid, p.foreground(t))
		noCert(t, dir)
	}

	// Stopped, then killed by the shell's kill: SIGTERM (and SIGCONT) to
	// the job, which hermeskilld turns into the ladder.
	p.typ(t, run)
	p.expect(t, `QUESTION\?`)
	p.typ(t, "\x1a")
	p.expect(t, `Stopped`)
	p.expect(t, `\$ $`)
	p.typ(t, "jobs -p\n")
	hkPID, err := strconv.Atoi(p.expect(t, `(\d+)\r?\n`)[1])
	require.NoError(t, err)
	p.typ(t, "kill %1\n")
	p.expect(t, `GOT-SIGINT`)
	require.Eventually(t, func() bool {
		_, err := os.Stat("/proc/" + strconv.Itoa(hkPID))
		return err != nil // exited, and reaped by the shell
	}, 10*time.Second, 10*time.Millisecond, "hermeskilld did not exit after the shell's kill")
	require.Equal(t, sh.Process.Pid, p.foreground(t))
	c := cert(t, dir)
	require.Equal(t, "manual", c["trigger_type"])
	require.Equal(t, "signal:SIGTERM", c["operator"])
	require.NotZero(t, p.lflag(t)&unix.ECHO)

	p.typ(t, "exit\n")
	done := make(chan error, 1)
	go func() { done <- sh.Wait() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		require.FailNow(t, "the shell did not exit", p.out.String())
	}
}

// An agent that fails to exec, after it was given the terminal, leaves the
// terminal to hermeskilld's group all the same.
func TestSuperviseTerminalAfterExecFailure(t *testing.T) {
	dir := t.TempDir()
	p := openPTY(t)
	notExec := filepath.Join(dir, "not-executable")
	require.NoError(t, os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644))
	sh := underSh(t, p, "--certs-dir", dir, "--", notExec)
	p.expect(t, `RC=126\b`)
	require.Equal(t, sh.Process.Pid, p.foreground(t))
	p.typ(t, "\n")
	require.NoError(t, sh.Wait())
}
