// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

// Package testchild re-executes the test binary as a child process with a
// named behaviour ("hang", "ignore-term", "escape", …), the way os/exec's
// own tests do: process, signal and containment code is tested against
// real processes, never mocks. It is imported only by tests.
//
// A test package calls Main from its TestMain first thing. Every helper
// that stays alive prints "ready [pid…]" on stdout once its signal
// handlers are in place: the readiness handshake Start waits for.
package testchild

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hermeskill/hermeskilld/internal/procfs"
	"github.com/hermeskill/hermeskilld/internal/procsup"
)

// Env names the helper mode in the child's environment.
const Env = "HK_TESTCHILD"

// Main runs the helper named by $HK_TESTCHILD and exits; it returns at
// once in the test process itself.
func Main() {
	mode := os.Getenv(Env)
	if mode == "" {
		return
	}
	helper(mode, os.Args[1:])
	os.Exit(0)
}

// Spec returns a procsup.Spec that runs helper mode with args.
func Spec(mode string, args ...string) procsup.Spec {
	return procsup.Spec{
		Argv: append([]string{os.Args[0]}, args...),
		Env:  append(environ(), Env+"="+mode),
	}
}

// environ is our environment without our own mode: a helper that starts
// helpers must not pass its mode on (the first of duplicate variables
// wins in getenv, and the child would run our mode again).
func environ() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, Env+"=") {
			env = append(env, kv)
		}
	}
	return env
}

func ready(extra ...int) {
	parts := []string{"ready"}
	for _, p := range extra {
		parts = append(parts, strconv.Itoa(p))
	}
	fmt.Println(strings.Join(parts, " "))
}

func hang() { select {} }

func helper(mode string, args []string) {
	switch mode {
	case "hang":
		ready()
		hang()
	case "exit":
		code, _ := strconv.Atoi(args[0])
		os.Exit(code)
	case "ignore-term":
		signal.Ignore(syscall.SIGTERM, syscall.SIGINT)
		ready()
		hang()
	case "spin":
		signal.Ignore(syscall.SIGTERM, syscall.SIGINT)
		ready()
		for {
		}
	case "exit-on-int":
		c := make(chan os.Signal, 1)
		signal.Notify(c, syscall.SIGINT)
		ready()
		<-c
		os.Exit(3)
	case "exit-on-term":
		c := make(chan os.Signal, 1)
		signal.Notify(c, syscall.SIGTERM)
		signal.Ignore(syscall.SIGINT)
		ready()
		<-c
		os.Exit(4)
	case "fork-tree":
		// N "hang" children in our process group; SIGTERM ignored.
		n, _ := strconv.Atoi(args[0])
		pids := make([]int, 0, n)
		for i := 0; i < n; i++ {
			pids = append(pids, startSelf("hang", false))
		}
		signal.Ignore(syscall.SIGTERM, syscall.SIGINT)
		ready(pids...)
		hang()
	case "escape":
		// A child that starts a grandchild in a new session (setsid)
		// ignoring SIGTERM, then exits: the grandchild is orphaned.
		out := runSelf("middle")
		signal.Ignore(syscall.SIGTERM)
		fmt.Println("ready " + out)
		hang()
	case "middle":
		fmt.Println(startSelf("escapee", true))
		os.Exit(0)
	case "join-group":
		// A process of the agent's session that puts itself in the
		// agent's process group (setpgid(2)): not the agent's.
		pgid, _ := strconv.Atoi(args[0])
		if err := syscall.Setpgid(0, pgid); err != nil {
			fmt.Fprintln(os.Stderr, "setpgid:", err)
			os.Exit(2)
		}
		ready()
		hang()
	case "escapee":
		signal.Ignore(syscall.SIGTERM, syscall.SIGINT)
		ready()
		hang()
	case "mini-supervisor":
		// A runtime of its own starting a "hang" child from a goroutine
		// that then exits locked to its thread (which kills the thread).
		r, err := procsup.NewRuntime(procsup.Options{})
		if err != nil {
			panic(err)
		}
		pidc := make(chan int)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
			p, err := r.Start(Spec("hang"))
			if err != nil {
				panic(err)
			}
			pidc <- p.PID()
		}()
		ready(<-pidc)
		hang()
	case "pollwait-runtime":
		// A runtime that waits on pidfds through the netpoller (the
		// daemon's): it reports how its children ended.
		r, err := procsup.NewRuntime(procsup.Options{PollWait: true})
		if err != nil {
			panic(err)
		}
		p, err := r.Start(Spec("exit", "7"))
		if err != nil {
			panic(err)
		}
		fmt.Println(p.Status().String())
		p, err = r.Start(Spec("hang"))
		if err != nil {
			panic(err)
		}
		fmt.Println("pidfds", PidfdsOf(p.PID()))
		_ = p.Signal(syscall.SIGKILL)
		fmt.Println(p.Status().String(), p.Status().ShellCode())
	case "reach":
		// What a process can do to others: for each pid in args (a
		// "-" before the pid: only the harmless attempts, for a target
		// that must survive even if they succeed), kill(2) with 0,
		// PTRACE_SEIZE, opening /proc/PID/mem, SIGSTOP and SIGKILL; then
		// the same SIGKILL to a child of its own. One line of errno
		// names ("ok" for none), then "ready".
		fmt.Println(reach(args))
		ready()
		hang()
	default:
		fmt.Fprintln(os.Stderr, "unknown test child mode", mode)
		os.Exit(2)
	}
}

// StartOutside starts helper mode with args through os/exec, outside any
// runtime (in our own process group and session), waits for its ready
// line and returns its pid. It is SIGKILLed at cleanup.
func StartOutside(t testing.TB, mode string, args ...string) int {
	t.Helper()
	pid := startSelf(mode, false, args...)
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	return pid
}

// startSelf starts this binary in mode with os/exec (a helper is a
// separate process, without the runtime under test) and waits for ready.
func startSelf(mode string, setsid bool, args ...string) int {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(environ(), Env+"="+mode)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: setsid}
	out, err := cmd.StdoutPipe()
	if err != nil {
		panic(err)
	}
	if err := cmd.Start(); err != nil {
		panic(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	if !strings.HasPrefix(line, "ready") {
		panic("helper not ready: " + line)
	}
	return cmd.Process.Pid
}

func runSelf(mode string) string {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(environ(), Env+"="+mode)
	out, err := cmd.Output()
	if err != nil {
		panic(err)
	}
	return strings.TrimSpace(string(out))
}

// Child is a helper started through a runtime under test.
type Child struct {
	P    *procsup.Process
	PIDs []int // pids the helper reported with "ready"
	out  io.Closer
}

// readyTimeout is generous: the machine may be loaded.
const readyTimeout = 30 * time.Second

// Start starts helper mode through rt with spec's Env/CgroupFD/… and
// waits for its readiness line. The child is SIGKILLed and reaped at
// cleanup.
func Start(t testing.TB, rt *procsup.Runtime, mode string, spec procsup.Spec, args ...string) *Child {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	base := Spec(mode, args...)
	spec.Argv = base.Argv
	spec.Env = append(base.Env, spec.Env...)
	spec.Stdout = w
	p, err := rt.Start(spec)
	w.Close()
	if err != nil {
		r.Close()
		t.Fatalf("start %s: %v", mode, err)
	}
	c := &Child{P: p, out: r}
	t.Cleanup(func() {
		_ = p.Signal(syscall.SIGKILL)
		r.Close()
		<-p.Done()
	})
	lines := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(r).ReadString('\n')
		lines <- line
	}()
	timer := time.NewTimer(readyTimeout)
	defer timer.Stop()
	select {
	case line := <-lines:
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != "ready" {
			t.Fatalf("helper %s exited before it was ready (%q)", mode, line)
		}
		for _, s := range f[1:] {
			pid, err := strconv.Atoi(s)
			if err != nil {
				t.Fatalf("helper %s: bad pid %q", mode, s)
			}
			c.PIDs = append(c.PIDs, pid)
		}
	case <-timer.C:
		t.Fatalf("helper %s not ready after %s", mode, readyTimeout)
	}
	return c
}

// Alive reports whether pid exists and is not a zombie.
func Alive(pid int) bool {
	st, err := procfs.Default().Stat(pid)
	return err == nil && st.State != 'Z'
}

// Exists reports whether pid has a /proc entry at all (zombies included).
func Exists(pid int) bool {
	_, err := os.Stat("/proc/" + strconv.Itoa(pid))
	return err == nil
}

// PidfdsOf counts this process's descriptors that are pidfds of pid
// (their fdinfo's "Pid:" line, proc(5)).
func PidfdsOf(pid int) int {
	fds, _ := os.ReadDir("/proc/self/fd")
	n := 0
	for _, e := range fds {
		if l, _ := os.Readlink("/proc/self/fd/" + e.Name()); l != "anon_inode:[pidfd]" {
			continue
		}
		info, _ := os.ReadFile("/proc/self/fdinfo/" + e.Name())
		for _, line := range strings.Split(string(info), "\n") {
			if v, ok := strings.CutPrefix(line, "Pid:"); ok && strings.TrimSpace(v) == strconv.Itoa(pid) {
				n++
			}
		}
	}
	return n
}

// reach is the "reach" helper's attempts (see helper).
func reach(targets []string) string {
	runtime.LockOSThread() // ptrace(2) requests come from one thread
	defer runtime.UnlockOSThread()
	name := func(err error) string {
		if err == nil {
			return "ok"
		}
		if errno, ok := err.(syscall.Errno); ok {
			return unix.ErrnoName(errno)
		}
		return err.Error()
	}
	var out []string
	for _, arg := range targets {
		harmless := strings.HasPrefix(arg, "-")
		pid, _ := strconv.Atoi(strings.TrimPrefix(arg, "-"))
		res := []string{"kill0=" + name(syscall.Kill(pid, 0))}
		err := unix.PtraceSeize(pid)
		if err == nil {
			_ = unix.PtraceDetach(pid)
		}
		res = append(res, "ptrace="+name(err))
		f, err := os.Open(fmt.Sprintf("/proc/%d/mem", pid))
		if err == nil {
			f.Close()
		} else if pe, ok := err.(*os.PathError); ok {
			err = pe.Err
		}
		res = append(res, "mem="+name(err))
		if !harmless {
			res = append(res, "stop="+name(syscall.Kill(pid, syscall.SIGSTOP)), "kill="+name(syscall.Kill(pid, syscall.SIGKILL)))
		}
		out = append(out, strconv.Itoa(pid)+": "+strings.Join(res, " "))
	}
	child := exec.Command(os.Args[0])
	child.Env = append(environ(), Env+"=hang")
	own := child.Start()
	if own == nil {
		own = syscall.Kill(child.Process.Pid, syscall.SIGKILL)
		_ = child.Wait()
	}
	out = append(out, "own child: kill="+name(own))
	return strings.Join(out, "; ")
}
