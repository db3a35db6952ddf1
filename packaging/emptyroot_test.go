// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package packaging

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestEmptyRoot shows that the static hermeskilld needs nothing from a
// container image: in a root that holds only it and static agents, entered
// with chroot(1) in new mount and PID namespaces as a container's
// entrypoint is, it supervises, kills and certifies, with the exit
// statuses docs/kubernetes.md states. What it does need is what every
// container runtime provides, and the cases pin down what:
//
//   - /proc, always: the heartbeat socket is chmod-ed through
//     /proc/self/fd and the agent's tree is found in /proc. Without it
//     hermeskilld refuses to start (125), the agent never runs.
//   - /dev/null, when it is not PID 1: it starts its keeper (from
//     /proc/self/exe) with /dev/null as stdin, and without a keeper it
//     refuses to start (125). As PID 1 no keeper runs.
//   - as another user than root: a directory it may write for its socket
//     ($XDG_RUNTIME_DIR, else /tmp) and one for --certs-dir. As root it
//     makes /run/hermeskill and /var/lib/hermeskill/certs itself.
//
// No libc, shell, /etc (passwd, group, localtime, resolv.conf), /dev
// beyond that, /sys or /tmp for root. Its environment is empty, as a bare
// image's.
func TestEmptyRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: unshare(1) --mount --pid and chroot(1)")
	}
	unshare := lookPath(t, "unshare", "util-linux")
	chroot := lookPath(t, "chroot", "coreutils")

	root := t.TempDir()
	require.NoError(t, os.Chmod(root, 0o755)) // the non-root case must enter it
	staticBuild(t, "cmd/hermeskilld", filepath.Join(root, "hermeskilld"))
	staticBuild(t, "examples/agents/goagent", filepath.Join(root, "goagent"))
	staticBuild(t, "packaging/testdata/wedgeagent", filepath.Join(root, "wedgeagent"))
	proc := filepath.Join(root, "proc")
	require.NoError(t, os.Mkdir(proc, 0o555)) // a mount point, empty on the host

	// container runs hermeskilld in root: as PID 1 of a new PID namespace
	// (--kill-child: killing unshare takes the namespace down) or in ours,
	// with a fresh /proc or none, as user (uid:gid) or root, with no
	// environment.
	type container struct {
		pid1, proc bool
		user       string
	}
	supervise := func(t *testing.T, c container, args ...string) outcome {
		argv := []string{unshare, "--mount"}
		if c.pid1 {
			argv = append(argv, "--pid", "--fork", "--kill-child")
		}
		if c.proc {
			argv = append(argv, "--mount-proc="+proc)
		}
		argv = append(argv, chroot)
		if c.user != "" {
			argv = append(argv, "--userspec="+c.user)
		}
		argv = append(argv, root, "/hermeskilld", "supervise")
		return run(t, 60*time.Second, "/", []string{}, append(argv, args...)...)
	}
	// certificate is the file that the one-line summary names, seen from
	// the host.
	certificate := func(t *testing.T, o outcome) string {
		m := regexp.MustCompile(`certificate: (/\S+\.json)\n`).FindStringSubmatch(o.stderr)
		require.NotNil(t, m, "no certificate in the summary line")
		path := filepath.Join(root, m[1])
		require.FileExists(t, path)
		return path
	}

	pid1 := container{pid1: true, proc: true}
	t.Run("agent's own status", func(t *testing.T) {
		o := supervise(t, pid1, "--id", "done", "--heartbeat-timeout", "5s", "--", "/goagent", "-steps", "3", "-delay", "10ms")
		require.Equal(t, 0, o.code)
		require.Contains(t, o.stderr, "done after 3 steps")
		// Containment auto: no cgroup file system in the root, so the
		// process group (and the host's agent cgroups out of reach).
		require.Contains(t, o.stderr, "containment: process group")
	})
	t.Run("automatic kill answered with 0 is 124", func(t *testing.T) {
		o := supervise(t, pid1, "--id", "loop", "--tool-loop", "5", "--", "/goagent", "-loop", "-delay", "10ms")
		require.Equal(t, 124, o.code)
		require.Contains(t, certificate(t, o), "/var/lib/hermeskill/certs/")
	})
	t.Run("SIGKILL is 137", func(t *testing.T) {
		o := supervise(t, pid1, "--id", "wedged", "--heartbeat-timeout", "1s", "--coop-grace", "200ms", "--term-grace", "200ms", "--", "/wedgeagent")
		require.Equal(t, 137, o.code)
		require.Contains(t, o.stderr, "escalation reached sigkill")
		certificate(t, o)
	})
	t.Run("without /proc it refuses to start", func(t *testing.T) {
		o := supervise(t, container{pid1: true}, "--id", "noproc", "--", "/goagent", "-steps", "1")
		require.Equal(t, 125, o.code)
		require.NotContains(t, o.stderr, "goagent: ", "the agent ran")
	})

	// Not PID 1 (a shell or an init before it): the keeper runs.
	notPID1 := container{proc: true}
	t.Run("not PID 1 without /dev/null it refuses to start", func(t *testing.T) {
		o := supervise(t, notPID1, "--id", "nodevnull", "--", "/goagent", "-steps", "1")
		require.Equal(t, 125, o.code)
		require.Contains(t, o.stderr, "keeper: open /dev/null")
		require.NotContains(t, o.stderr, "goagent: ", "the agent ran")
	})
	t.Run("not PID 1 with /dev/null", func(t *testing.T) {
		dev := filepath.Join(root, "dev")
		require.NoError(t, os.Mkdir(dev, 0o755))
		t.Cleanup(func() { os.RemoveAll(dev) })
		if err := unix.Mknod(filepath.Join(dev, "null"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
			t.Skipf("mknod %s/null: %v (a nodev file system?)", dev, err)
		}
		o := supervise(t, notPID1, "--id", "keeper", "--tool-loop", "5", "--", "/goagent", "-loop", "-delay", "10ms")
		require.Equal(t, 124, o.code)
		certificate(t, o)
	})

	t.Run("as nobody with /tmp and --certs-dir", func(t *testing.T) {
		tmp, certs := filepath.Join(root, "tmp"), filepath.Join(root, "certs")
		require.NoError(t, os.Mkdir(tmp, 0o777))
		require.NoError(t, os.Chmod(tmp, 0o1777))
		require.NoError(t, os.Mkdir(certs, 0o700))
		require.NoError(t, os.Chown(certs, 65534, 65534))
		t.Cleanup(func() { os.RemoveAll(tmp); os.RemoveAll(certs) })
		o := supervise(t, container{pid1: true, proc: true, user: "65534:65534"},
			"--id", "nobody", "--tool-loop", "5", "--certs-dir", "/certs", "--", "/goagent", "-loop", "-delay", "10ms")
		require.Equal(t, 124, o.code)
		require.True(t, strings.HasPrefix(certificate(t, o), certs+"/"))
	})
}
