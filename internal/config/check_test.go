// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/hermeskill/hermeskilld/internal/landlock"
	"github.com/hermeskill/hermeskilld/internal/testaudit"
	"github.com/hermeskill/hermeskilld/internal/testnobody"
)

// A user and a group no host has.
const (
	noSuchUser  = "hk-no-such-user"
	noSuchGroup = "hk-no-such-group"
)

// nobodyName is uid 65534's name in the user database: the tests run an
// agent's checks as that user. Without it they cannot run.
func nobodyName(t *testing.T) string {
	t.Helper()
	u, err := user.LookupId(strconv.Itoa(testnobody.UID))
	if err != nil {
		t.Skipf("no user with uid 65534 in the user database (%v): the checks of another user's permissions need one", err)
	}
	return u.Username
}

// needRoot: the files of these tests are made for uid 65534 by chown,
// which only root may do.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skipf("the tests run as uid %d, not root: chown(2) to uid 65534 and exec as that user need CAP_CHOWN and CAP_SETUID (run go test as root)", os.Geteuid())
	}
}

func writeFile(t *testing.T, path, content string, mode os.FileMode) string {
	t.Helper()
	require.NoError(t, os.WriteFile(path, []byte(content), mode))
	require.NoError(t, os.Chmod(path, mode)) // past the umask
	return path
}

func mkdir(t *testing.T, path string, mode os.FileMode) string {
	t.Helper()
	require.NoError(t, os.Mkdir(path, mode))
	require.NoError(t, os.Chmod(path, mode))
	return path
}

// kernelRuns runs path as uid 65534 and says whether execve(2) let it:
// what the check says must be what the kernel does.
func kernelRuns(t *testing.T, path string) bool {
	t.Helper()
	cmd := exec.Command(path)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: testnobody.Credential()}
	err := cmd.Run()
	if errors.Is(err, fs.ErrPermission) {
		return false
	}
	require.NoError(t, err, "runs, or is refused with EACCES")
	return true
}

// checkAgentFile parses an agent file as the daemon does and runs its
// host check.
func checkAgentFile(t *testing.T, dir, content string) (string, error) {
	t.Helper()
	path := writeFile(t, filepath.Join(dir, "agent.yaml"), content, 0o644)
	a, err := LoadAgent(path, nil)
	require.NoError(t, err)
	a.Normalize()
	require.NoError(t, a.Validate(true))
	return path, a.CheckHost(nil)
}

func TestAgentCheckHostUserCannotExecute(t *testing.T) {
	needRoot(t)
	nobody := nobodyName(t)
	dir := testnobody.Dir(t) // uid 65534 can reach it
	private := mkdir(t, filepath.Join(dir, "private"), 0o700)
	agent := writeFile(t, filepath.Join(private, "agent"), "#!/bin/sh\nexit 0\n", 0o755)
	who := `user "` + nobody + `" (uid 65534)`

	// The command in a root directory of mode 0700: named by its path,
	// and by a name found in PATH.
	path, err := checkAgentFile(t, dir, "id: bot\nuser: "+nobody+"\ncommand: ["+agent+"]\n")
	require.ErrorIs(t, err, ErrHost)
	require.ErrorIs(t, err, ErrInvalid)
	require.EqualError(t, err, path+":3: command: "+agent+": "+who+" cannot execute it: it may not search "+private+" (mode 0700, owner 0:0)")
	require.False(t, kernelRuns(t, agent))

	t.Setenv("PATH", private+":/usr/bin:/bin")
	path, err = checkAgentFile(t, dir, "id: bot\ncommand: [agent, --x]\nuser: "+nobody+"\n")
	require.EqualError(t, err, path+":2: command: "+agent+" (agent in PATH): "+who+" cannot execute it: it may not search "+private+" (mode 0700, owner 0:0)")

	// The same as root (user: unset, the daemon's own) is fine.
	_, err = checkAgentFile(t, dir, "id: bot\ncommand: [agent]\n")
	require.NoError(t, err)
	_, err = checkAgentFile(t, dir, "id: bot\ncommand: [agent]\nuser: root\n")
	require.NoError(t, err)

	// Searchable, but no execute bit for others.
	require.NoError(t, os.Chmod(private, 0o755))
	require.NoError(t, os.Chmod(agent, 0o744))
	path, err = checkAgentFile(t, dir, "id: bot\nuser: "+nobody+"\ncommand: ["+agent+"]\n")
	require.EqualError(t, err, path+":3: command: "+agent+": "+who+" cannot execute it: no execute permission (mode 0744, owner 0:0)")
	require.False(t, kernelRuns(t, agent))

	// The group's bits for a member of the group (nobody's own group).
	require.NoError(t, os.Chown(agent, 0, testnobody.GID))
	require.NoError(t, os.Chmod(agent, 0o750))
	_, err = checkAgentFile(t, dir, "id: bot\nuser: "+nobody+"\ncommand: ["+agent+"]\n")
	require.NoError(t, err)
	require.True(t, kernelRuns(t, agent))
	// The owner's bits for the owner, even when others may.
	require.NoError(t, os.Chown(agent, testnobody.UID, 0))
	require.NoError(t, os.Chmod(agent, 0o645))
	path, err = checkAgentFile(t, dir, "id: bot\nuser: "+nobody+"\ncommand: ["+agent+"]\n")
	require.EqualError(t, err, path+":3: command: "+agent+": "+who+" cannot execute it: no execute permission (mode 0645, owner 65534:0)")
	require.False(t, kernelRuns(t, agent))

	// Root needs one execute bit.
	require.NoError(t, os.Chmod(agent, 0o644))
	path, err = checkAgentFile(t, dir, "id: bot\ncommand: ["+agent+"]\n")
	require.EqualError(t, err, path+":2: command: "+agent+": hermeskilld's own user (uid 0) cannot execute it: no execute permission (mode 0644, owner 65534:0)")
}

// A relative command is found from cwd; cwd itself must be enterable.
func TestAgentCheckHostCwd(t *testing.T) {
	needRoot(t)
	nobody := nobodyName(t)
	dir := testnobody.Dir(t)
	work := mkdir(t, filepath.Join(dir, "work"), 0o755)
	writeFile(t, filepath.Join(work, "agent"), "#!/bin/sh\n", 0o755)

	_, err := checkAgentFile(t, dir, "id: bot\nuser: "+nobody+"\ncwd: "+work+"\ncommand: [./agent]\n")
	require.NoError(t, err)

	path, err := checkAgentFile(t, dir, "id: bot\nuser: "+nobody+"\ncwd: "+work+"\ncommand: [./agnet]\n")
	require.EqualError(t, err, path+":4: command: "+filepath.Join(work, "agnet")+`: user "`+nobody+`" (uid 65534) cannot execute it: it does not exist`)

	require.NoError(t, os.Chmod(work, 0o700))
	path, err = checkAgentFile(t, dir, "id: bot\nuser: "+nobody+"\ncwd: "+work+"\ncommand: [/bin/true]\n")
	require.EqualError(t, err, path+":3: cwd: "+work+`: user "`+nobody+`" (uid 65534) cannot enter it: no search permission (mode 0700, owner 0:0)`)
}

// Each writable path must exist: the agent could not be started without.
func TestAgentCheckHostWritable(t *testing.T) {
	if landlock.ABI() < landlock.FilesABI {
		t.Skipf("this kernel's Landlock ABI is %d, below %d (filesystem rules): writable is refused there, not checked path by path", landlock.ABI(), landlock.FilesABI)
	}
	dir := t.TempDir()
	_, err := checkAgentFile(t, dir, "id: bot\ncommand: [/bin/true]\nwritable: ["+dir+"]\n")
	require.NoError(t, err)
	missing := filepath.Join(dir, "missing")
	path, err := checkAgentFile(t, dir, "id: bot\ncommand: [/bin/true]\nwritable:\n  - "+dir+"\n  - "+missing+"\n")
	require.ErrorIs(t, err, ErrHost)
	require.EqualError(t, err, path+":5: writable[1]: stat "+missing+": no such file or directory")
}

// checks.denials passes the host's checks where the denials can be
// counted. (Where they cannot, the run refuses to start with the reason:
// internal/supervisor's TestDenialsCheckRefusedWhenUncountable.)
func TestAgentCheckHostDenials(t *testing.T) {
	if abi := landlock.ABI(); abi < landlock.LoggingABI {
		t.Skipf("this kernel's Landlock ABI is %d, below %d: it logs no denials", abi, landlock.LoggingABI)
	}
	testaudit.Enable(t)
	dir := t.TempDir()
	_, err := checkAgentFile(t, dir, "id: bot\ncommand: [/bin/true]\nwritable: ["+dir+"]\nchecks:\n  denials: {kill: 3}\n")
	require.NoError(t, err)
}

func TestAgentCheckHostUnknownUserAndCommand(t *testing.T) {
	dir := t.TempDir()
	path, err := checkAgentFile(t, dir, "id: bot\ncommand: [/bin/true]\nuser: "+noSuchUser+"\n")
	require.ErrorIs(t, err, ErrHost)
	require.EqualError(t, err, path+`:3: user: no user "`+noSuchUser+`" on this host`)

	t.Setenv("PATH", dir)
	path, err = checkAgentFile(t, dir, "id: bot\n\ncommand: [hk-no-such-command]\n")
	require.EqualError(t, err, path+":3: command: hk-no-such-command: not found in PATH ("+dir+") as hermeskilld resolves it")

	path, err = checkAgentFile(t, dir, "id: bot\ncommand: ["+dir+"]\n")
	require.EqualError(t, err, path+":2: command: "+dir+": hermeskilld's own user (uid "+strconv.Itoa(os.Geteuid())+") cannot execute it: it is a directory")
}

// setfacl runs setfacl(1) with args. Without it (Debian: apt-get install
// acl; .ci/run installs it), or on a file system without POSIX ACLs, the
// test is skipped.
func setfacl(t *testing.T, args ...string) {
	t.Helper()
	bin, err := exec.LookPath("setfacl")
	if err != nil {
		t.Skipf("setfacl is not on PATH (%v): install it (Debian: apt-get install acl) to test POSIX ACLs", err)
	}
	out, err := exec.Command(bin, args...).CombinedOutput()
	if err != nil && strings.Contains(string(out), "Operation not supported") {
		t.Skipf("the file system has no POSIX ACLs: setfacl %s: %s", strings.Join(args, " "), out)
	}
	require.NoError(t, err, "setfacl %s: %s", strings.Join(args, " "), out)
}

// POSIX ACLs, set with setfacl: the check answers as the kernel does
// (execve as uid 65534 is the judge), for what the mode bits alone would
// answer otherwise.
func TestAgentCheckHostACL(t *testing.T) {
	needRoot(t)
	nobody := nobodyName(t)
	dir := testnobody.Dir(t)
	private := mkdir(t, filepath.Join(dir, "private"), 0o700)
	agent := writeFile(t, filepath.Join(private, "agent"), "#!/bin/sh\n", 0o700)
	src := "id: bot\nuser: " + nobody + "\ncommand: [" + agent + "]\n"
	who := `user "` + nobody + `" (uid 65534)`
	check := func() error {
		t.Helper()
		_, err := checkAgentFile(t, dir, src)
		return err
	}

	// A named user entry grants search and execute that the mode bits
	// (0700, root's) do not.
	setfacl(t, "-m", "u:"+strconv.Itoa(testnobody.UID)+":rx", private, agent)
	require.NoError(t, check(), "the ACL grants uid 65534 search and execute")
	require.True(t, kernelRuns(t, agent))

	// The mask limits the named entry: r-- on the file denies execute, on
	// the directory search.
	setfacl(t, "-m", "m::r", agent)
	require.ErrorContains(t, check(), ": "+who+" cannot execute it: no execute permission (mode 0740, owner 0:0)")
	require.False(t, kernelRuns(t, agent))
	setfacl(t, "-m", "m::rx", agent)
	require.NoError(t, check())
	setfacl(t, "-m", "m::r", private)
	require.ErrorContains(t, check(), ": "+who+" cannot execute it: it may not search "+private+" (mode 0740, owner 0:0)")
	require.False(t, kernelRuns(t, agent))
	setfacl(t, "-m", "m::rx", private)
	require.NoError(t, check())

	// The named user's entry decides for that user: without x it is
	// denied, although a group entry of a group it is in grants x.
	setfacl(t, "-m", "u:"+strconv.Itoa(testnobody.UID)+":r,g:"+strconv.Itoa(testnobody.GID)+":rx", agent)
	require.ErrorContains(t, check(), ": "+who+" cannot execute it: no execute permission")
	require.False(t, kernelRuns(t, agent))

	// Without a named user entry, the group entry of its group grants it.
	setfacl(t, "-x", "u:"+strconv.Itoa(testnobody.UID), agent)
	require.NoError(t, check(), "the ACL grants the group 65534 execute")
	require.True(t, kernelRuns(t, agent))

	// Without its extended entries, the file is back to its mode bits
	// (0700: the group entry's bits were ---).
	setfacl(t, "-b", agent)
	require.ErrorContains(t, check(), ": "+who+" cannot execute it: no execute permission (mode 0700, owner 0:0)")
	require.False(t, kernelRuns(t, agent))
}

// The mode bits alone, the kernel's answers: the owner's execute bit for
// the owner, none for the others, and a directory on the way that the user
// may not search.
func TestAgentCheckHostModeBits(t *testing.T) {
	needRoot(t)
	nobody := nobodyName(t)
	dir := testnobody.Dir(t)
	sub := mkdir(t, filepath.Join(dir, "sub"), 0o755)
	agent := writeFile(t, filepath.Join(sub, "agent"), "#!/bin/sh\n", 0o700)
	require.NoError(t, os.Chown(agent, testnobody.UID, testnobody.GID))
	src := "id: bot\nuser: " + nobody + "\ncommand: [" + agent + "]\n"
	who := `user "` + nobody + `" (uid 65534)`

	// Execute for the owner only: the owner, uid 65534, may.
	_, err := checkAgentFile(t, dir, src)
	require.NoError(t, err)
	require.True(t, kernelRuns(t, agent))

	// Owned by root, execute for the owner only: uid 65534 may not;
	// root, with one execute bit, may.
	require.NoError(t, os.Chown(agent, 0, 0))
	path, err := checkAgentFile(t, dir, src)
	require.EqualError(t, err, path+":3: command: "+agent+": "+who+" cannot execute it: no execute permission (mode 0700, owner 0:0)")
	require.False(t, kernelRuns(t, agent))
	_, err = checkAgentFile(t, dir, "id: bot\ncommand: ["+agent+"]\n")
	require.NoError(t, err)

	// A directory on the way without search permission for others (r--
	// is not enough): named, whatever the file's own mode.
	require.NoError(t, os.Chmod(agent, 0o755))
	require.NoError(t, os.Chmod(sub, 0o754))
	path, err = checkAgentFile(t, dir, src)
	require.EqualError(t, err, path+":3: command: "+agent+": "+who+" cannot execute it: it may not search "+sub+" (mode 0754, owner 0:0)")
	require.False(t, kernelRuns(t, agent))

	// Its group's bits for a member of the group: searchable again.
	require.NoError(t, os.Chown(sub, 0, testnobody.GID))
	require.NoError(t, os.Chmod(sub, 0o750))
	_, err = checkAgentFile(t, dir, src)
	require.NoError(t, err)
	require.True(t, kernelRuns(t, agent))

	// A symbolic link is checked at both ends: the directories to the link
	// and those to its target.
	link := filepath.Join(dir, "link")
	require.NoError(t, os.Symlink(agent, link))
	require.NoError(t, os.Chmod(sub, 0o700))
	path, err = checkAgentFile(t, dir, "id: bot\nuser: "+nobody+"\ncommand: ["+link+"]\n")
	require.EqualError(t, err, path+":3: command: "+link+": "+who+" cannot execute it: it may not search "+sub+" (mode 0700, owner 0:65534)")
	require.False(t, kernelRuns(t, link))
}

// asNobody is set in the environment of the test binary run again as uid
// 65534 by TestAgentCheckHostNotRoot; its value is the directory of the
// files to check.
const asNobody = "HK_CONFIG_TEST_AS_NOBODY"

// Run by another user than root, the check can ask the kernel about that
// user only: another user's cwd or command is reported as needing root
// at the line of user, and its own are checked.
func TestAgentCheckHostNotRoot(t *testing.T) {
	if dir := os.Getenv(asNobody); dir != "" {
		notRoot(t, dir)
		return
	}
	needRoot(t)
	nobodyName(t)
	bin, dir := testnobody.Executable(t), testnobody.Dir(t)
	mkdir(t, filepath.Join(dir, "private"), 0o700)
	writeFile(t, filepath.Join(dir, "private", "agent"), "#!/bin/sh\n", 0o755)
	home := mkdir(t, filepath.Join(dir, "home"), 0o700)
	require.NoError(t, os.Chown(home, testnobody.UID, testnobody.GID))
	cmd := exec.Command(bin, "-test.run=^TestAgentCheckHostNotRoot$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), asNobody+"="+dir, "TMPDIR="+home)
	cmd.Dir = home
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: testnobody.Credential()}
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "--- PASS: TestAgentCheckHostNotRoot", "it ran as uid 65534")
}

// notRoot is TestAgentCheckHostNotRoot run as uid 65534, with dir made by
// root: dir/private (0700) holds dir/private/agent; $TMPDIR is ours.
func notRoot(t *testing.T, dir string) {
	require.Equal(t, testnobody.UID, os.Geteuid())
	nobody := nobodyName(t)
	load := func(content string) (string, *Agent) {
		t.Helper()
		path := writeFile(t, filepath.Join(t.TempDir(), "agent.yaml"), content, 0o644)
		a, err := LoadAgent(path, nil)
		require.NoError(t, err)
		a.Normalize()
		require.NoError(t, a.Validate(true))
		return path, a
	}

	path, a := load("id: bot\nuser: root\ncommand: [/bin/true]\n")
	require.EqualError(t, a.CheckHost(nil), path+`:2: user: checking what user "root" (uid 0) may enter and execute needs hermeskilld to run as root (it runs as uid 65534)`)
	path, a = load("id: bot\ncwd: /\nuser: 0\ncommand: [/bin/true]\n")
	require.EqualError(t, a.CheckHost(nil), path+`:3: user: checking what user "0" (uid 0) may enter and execute needs hermeskilld to run as root (it runs as uid 65534)`)

	// Our own user, by name or unset: asked of the kernel as ourselves.
	_, a = load("id: bot\nuser: " + nobody + "\ncwd: /\ncommand: [/bin/true]\n")
	require.NoError(t, a.CheckHost(nil))
	private := filepath.Join(dir, "private")
	agent := filepath.Join(private, "agent")
	path, a = load("id: bot\nuser: " + nobody + "\ncommand: [" + agent + "]\n")
	require.EqualError(t, a.CheckHost(nil), path+":3: command: "+agent+`: user "`+nobody+`" (uid 65534) cannot execute it: it may not search `+private+" (mode 0700, owner 0:0)")
	path, a = load("id: bot\ncwd: " + private + "\ncommand: [/bin/true]\n")
	require.EqualError(t, a.CheckHost(nil), path+":2: cwd: "+private+": hermeskilld's own user (uid 65534) cannot enter it: no search permission (mode 0700, owner 0:0)")
}

// The probes change the credentials of their own threads only: none of
// the process's threads is left with another user's, and this goroutine's
// are root's throughout.
func TestKernelExecLeavesNoThreadChanged(t *testing.T) {
	needRoot(t)
	cred := testnobody.Credential()
	private := mkdir(t, filepath.Join(testnobody.Dir(t), "private"), 0o700)
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			access, err := kernelExec(cred, []string{"/", private})
			assert.NoError(t, err)
			assert.NoError(t, access["/"])
			assert.ErrorIs(t, access[private], unix.EACCES)
		})
	}
	wg.Wait()
	require.Equal(t, 0, unix.Geteuid())
	groups, err := unix.Getgroups()
	require.NoError(t, err)
	require.NotContains(t, groups, testnobody.GID)
	access, err := kernelExec(nil, []string{private})
	require.NoError(t, err)
	require.NoError(t, access[private], "root may search it")

	// Each thread's ids, as /proc lists them, are the process's once the
	// probes' threads have ended (they end just after their goroutines).
	ids := func(status []byte) []string {
		var out []string
		for _, line := range strings.Split(string(status), "\n") {
			if f := strings.Fields(line); len(f) > 0 && (f[0] == "Uid:" || f[0] == "Gid:" || f[0] == "Groups:") {
				out = append(out, line)
			}
		}
		return out
	}
	main, err := os.ReadFile("/proc/self/status")
	require.NoError(t, err)
	want := ids(main)
	require.Len(t, want, 3)
	require.Equal(t, "Uid:\t0\t0\t0\t0", want[0], "the main thread's, the process's in the kernel's checks of signals sent to it")
	var changed string
	assert.Eventually(t, func() bool {
		tasks, err := os.ReadDir("/proc/self/task")
		if err != nil {
			changed = err.Error()
			return false
		}
		changed = ""
		for _, task := range tasks {
			status, err := os.ReadFile(filepath.Join("/proc/self/task", task.Name(), "status"))
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				changed += err.Error() + "; "
				continue
			}
			if got := ids(status); !slices.Equal(got, want) {
				changed += fmt.Sprintf("thread %s: %q; ", task.Name(), got)
			}
		}
		return changed == ""
	}, 10*time.Second, 10*time.Millisecond, "threads left with other ids than the process's")
	require.Empty(t, changed, "the process's: %q", want)
}

func TestDaemonCheckHost(t *testing.T) {
	root := t.TempDir()
	agents := mkdir(t, filepath.Join(root, "agents.d"), 0o755)
	rootGroup, err := user.LookupGroupId("0")
	require.NoError(t, err)
	check := func(content string) (string, error) {
		t.Helper()
		path := writeFile(t, filepath.Join(root, "hk.yaml"), content, 0o644)
		cfg, err := LoadDaemon(path)
		require.NoError(t, err)
		return path, cfg.CheckHost()
	}

	_, err = check("agents_dir: " + agents + "\ncontrol: {read_group: " + rootGroup.Name + ", operators_group: 0}\n")
	require.NoError(t, err, "a group by name, a group by gid")

	path, err := check("agents_dir: " + agents + "\ncontrol:\n  read_group: " + noSuchGroup + "\n  operators_group: 4000000000\n" +
		"defaults:\n  user: " + noSuchUser + "\n")
	require.ErrorIs(t, err, ErrHost)
	require.EqualError(t, err, strings.Join([]string{
		path + `:3: control.read_group: no group "` + noSuchGroup + `" on this host (create it, or correct the name)`,
		path + `:4: control.operators_group: no group "4000000000" on this host (create it, or correct the name)`,
		path + `:6: defaults.user: no user "` + noSuchUser + `" on this host`,
	}, "\n"))

	missing := filepath.Join(root, "agnets.d")
	path, err = check("state_dir: /x\nagents_dir: " + missing + "\n")
	require.ErrorIs(t, err, ErrNoAgentsDir)
	require.EqualError(t, err, path+":2: agents_dir: "+missing+" does not exist (create it, or correct agents_dir)")

	file := writeFile(t, filepath.Join(root, "file"), "", 0o644)
	for _, p := range []string{file, filepath.Join(file, "agents.d")} {
		path, err = check("agents_dir: " + p + "\n")
		require.ErrorIs(t, err, syscall.ENOTDIR, p)
		require.NotErrorIs(t, err, ErrNoAgentsDir, "not a directory is not missing: not even the default is created")
		require.ErrorContains(t, err, path+":1: agents_dir: ")
	}

	// The default agents_dir may be missing: the daemon creates it.
	path, err = check("{}\n")
	cfg, lerr := LoadDaemon(path)
	require.NoError(t, lerr)
	_, statErr := os.Stat(DefaultDaemon().AgentsDir)
	require.Equal(t, errors.Is(statErr, fs.ErrNotExist), cfg.CreatesAgentsDir())
	if cfg.CreatesAgentsDir() {
		require.NoError(t, err)
	}
}

// signalEnv is set in the environment of the test binary run again as
// uid 65534 by TestThreadCredentialNotSignalled: "PID TID" of the thread
// to signal.
const signalEnv = "HK_CONFIG_TEST_TGKILL"

// A thread that took another user's credentials for a probe keeps root's
// real and saved uid: no process of that user may signal it (a SIGKILL to
// one thread would end the whole process). With the user's real uid too,
// as for the fallback on kernels without faccessat2, it may.
func TestThreadCredentialNotSignalled(t *testing.T) {
	if ids := os.Getenv(signalEnv); ids != "" {
		var pid, tid int
		_, err := fmt.Sscan(ids, &pid, &tid)
		require.NoError(t, err)
		fmt.Printf("tgkill: %v\n", unix.Tgkill(pid, tid, 0))
		return
	}
	needRoot(t)
	bin := testnobody.Executable(t)
	signal := func(realIDs bool) string {
		t.Helper()
		tid, release := make(chan int), make(chan struct{})
		go func() {
			runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
			err := setThreadCredential(testnobody.Credential())
			if err == nil && realIDs {
				err = setThreadRealIDs(testnobody.Credential())
			}
			assert.NoError(t, err)
			tid <- unix.Gettid()
			<-release
		}()
		defer close(release)
		cmd := exec.Command(bin, "-test.run=^TestThreadCredentialNotSignalled$", "-test.count=1")
		cmd.Env = append(os.Environ(), signalEnv+"="+strconv.Itoa(os.Getpid())+" "+strconv.Itoa(<-tid))
		cmd.Dir = "/"
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: testnobody.Credential()}
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		return string(out)
	}
	require.Contains(t, signal(false), "tgkill: operation not permitted\n")
	require.Contains(t, signal(true), "tgkill: <nil>\n")
}
