// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package config

import (
	"encoding/binary"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

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

// A POSIX ACL that grants uid 65534 what the mode bits do not: the check
// reads it as the kernel does, and does not refuse a command that runs.
func TestAgentCheckHostACL(t *testing.T) {
	needRoot(t)
	nobody := nobodyName(t)
	dir := testnobody.Dir(t)
	private := mkdir(t, filepath.Join(dir, "private"), 0o700)
	agent := writeFile(t, filepath.Join(private, "agent"), "#!/bin/sh\n", 0o700)
	// user::rwx user:65534:r-x group::--- mask::r-x other::---
	aclFor := func(userPerm uint16) []byte {
		b := binary.LittleEndian.AppendUint32(nil, 2)
		for _, e := range []aclEntry{{aclUserObj, 7, 0xffffffff}, {aclUser, userPerm, testnobody.UID}, {aclGroupObj, 0, 0xffffffff}, {aclMask, 5, 0xffffffff}, {aclOther, 0, 0xffffffff}} {
			b = binary.LittleEndian.AppendUint16(b, e.tag)
			b = binary.LittleEndian.AppendUint16(b, e.perm)
			b = binary.LittleEndian.AppendUint32(b, e.id)
		}
		return b
	}
	for _, p := range []string{private, agent} {
		if err := unix.Setxattr(p, "system.posix_acl_access", aclFor(5), 0); err != nil {
			if errors.Is(err, unix.EOPNOTSUPP) {
				t.Skipf("the file system of %s has no POSIX ACLs: %v", p, err)
			}
			require.NoError(t, err)
		}
	}
	_, err := checkAgentFile(t, dir, "id: bot\nuser: "+nobody+"\ncommand: ["+agent+"]\n")
	require.NoError(t, err, "the ACL grants uid 65534 search and execute")
	require.True(t, kernelRuns(t, agent))

	// Its named entry without x: denied, although other users' bits are not asked.
	require.NoError(t, unix.Setxattr(agent, "system.posix_acl_access", aclFor(4), 0))
	_, err = checkAgentFile(t, dir, "id: bot\nuser: "+nobody+"\ncommand: ["+agent+"]\n")
	require.ErrorContains(t, err, "cannot execute it: no execute permission")
	require.False(t, kernelRuns(t, agent))
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
