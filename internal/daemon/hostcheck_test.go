// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/hermeskill/hermeskilld/internal/config"
	"github.com/hermeskill/hermeskilld/internal/control"
	"github.com/hermeskill/hermeskilld/internal/testnobody"
)

// A daemon file that names what this host does not have is refused when
// the daemon starts, at the line of the key, before anything is made: a
// control group, the user of the defaults, agents_dir.
func TestNewRefusesWhatTheHostLacks(t *testing.T) {
	for name, tc := range map[string]struct{ extra, want string }{
		"group":         {"control: {read_group: hk-no-such-group}\n", `:4: control.read_group: no group "hk-no-such-group" on this host (create it, or correct the name)`},
		"defaults user": {"defaults:\n  user: hk-no-such-user\n", `:5: defaults.user: no user "hk-no-such-user" on this host`},
	} {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			agents := filepath.Join(root, "agents")
			require.NoError(t, os.Mkdir(agents, 0o755))
			path := filepath.Join(root, "hk.yaml")
			content := "state_dir: " + filepath.Join(root, "state") + "\nruntime_dir: " + filepath.Join(root, "run") +
				"\nagents_dir: " + agents + "\n" + tc.extra
			require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
			cfg, err := config.LoadDaemon(path)
			require.NoError(t, err, "valid as a file: the host is what lacks")
			_, err = newDaemon(Options{Config: cfg, Log: zaptest.NewLogger(t)}, true)
			require.ErrorIs(t, err, config.ErrHost)
			require.EqualError(t, err, path+tc.want)
			require.NoDirExists(t, filepath.Join(root, "state"), "refused before anything is made")
		})
	}

	root := t.TempDir()
	missing := filepath.Join(root, "agnets.d")
	path := filepath.Join(root, "hk.yaml")
	require.NoError(t, os.WriteFile(path, []byte("state_dir: "+filepath.Join(root, "state")+"\nagents_dir: "+missing+"\n"), 0o644))
	cfg, err := config.LoadDaemon(path)
	require.NoError(t, err)
	_, err = newDaemon(Options{Config: cfg, Log: zaptest.NewLogger(t)}, true)
	require.ErrorIs(t, err, ErrNoAgentsDir)
	require.EqualError(t, err, path+":2: agents_dir: "+missing+" does not exist (create it, or correct agents_dir)")
	require.NoDirExists(t, missing, "a mistyped agents_dir is not created")
	require.NoDirExists(t, filepath.Join(root, "state"))
}

// An agent file whose user cannot execute its command is invalid: never
// started when new; when it is an edit of a running agent, reported, and
// the agent keeps its last good configuration.
func TestAgentFileTheUserCannotRun(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skipf("the tests run as uid %d, not root: a daemon that starts agents as uid 65534 needs CAP_SETUID (run go test as root)", os.Geteuid())
	}
	nobody, err := user.LookupId(strconv.Itoa(testnobody.UID))
	if err != nil {
		t.Skipf("no user with uid 65534 (%v): the agent must run as another user than root", err)
	}
	dir := testnobody.Dir(t)
	private := filepath.Join(dir, "private")
	require.NoError(t, os.Mkdir(private, 0o700))
	cmd := filepath.Join(private, "agent")
	require.NoError(t, os.WriteFile(cmd, []byte("#!/bin/sh\n"), 0o755))
	require.NoError(t, os.Chmod(cmd, 0o755))
	open := filepath.Join(dir, "agent")
	require.NoError(t, os.WriteFile(open, []byte("#!/bin/sh\n"), 0o755))
	require.NoError(t, os.Chmod(open, 0o755))
	bad := "id: %s\ncommand: [" + cmd + "]\nuser: " + nobody.Username + "\n"

	synctest.Test(t, func(t *testing.T) {
		d, f := newTestDaemon(t)
		d.hostCheck = checkAgentHost

		path := writeAgentFile(t, d, "locked", fmt.Sprintf(bad, "locked"))
		synctest.Wait()
		require.Empty(t, f.of("locked"), "never started")
		st, err := d.Status("locked")
		require.NoError(t, err)
		require.Equal(t, control.StateInvalid, st.State)
		require.Equal(t, path+":2: command: "+cmd+`: user "`+nobody.Username+`" (uid 65534) cannot execute it: it may not search `+
			private+" (mode 0700, owner 0:0)", st.ConfigError)

		writeAgentFile(t, d, "bot", "id: bot\ncommand: ["+open+"]\nuser: "+nobody.Username+"\n")
		synctest.Wait()
		require.Len(t, f.of("bot"), 1)
		require.Equal(t, control.StateRunning, state(d, "bot"))
		path = writeAgentFile(t, d, "bot", fmt.Sprintf(bad, "bot"))
		synctest.Wait()
		st, err = d.Status("bot")
		require.NoError(t, err)
		require.Equal(t, control.StateRunning, st.State, "the running agent keeps its last good configuration")
		require.Contains(t, st.ConfigError, path+":2: command: "+cmd+": ")
		require.Empty(t, st.Pending, "the bad command is not pending for the next start")
		require.Len(t, f.of("bot"), 1)
	})
}
