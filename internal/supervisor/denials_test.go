// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package supervisor

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/hermeskill/hermeskilld/internal/certs"
	"github.com/hermeskill/hermeskilld/internal/config"
	"github.com/hermeskill/hermeskilld/internal/denials"
	"github.com/hermeskill/hermeskilld/internal/landlock"
	"github.com/hermeskill/hermeskilld/internal/symptoms"
	"github.com/hermeskill/hermeskilld/internal/testaudit"
)

// startDenials runs a with the given reader of denials.
func startDenials(t *testing.T, a *config.Agent, open func() (*denials.Reader, error)) (*Run, error) {
	t.Helper()
	dir, err := os.MkdirTemp("", "hksup")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	return Start(Options{Agent: a, Runtime: rt, Exclusive: true, SocketDir: filepath.Join(dir, "sock"),
		CertsDir: filepath.Join(dir, "certs"), Log: zaptest.NewLogger(t), Denials: open})
}

// An agent that keeps writing where it may not is killed by the denials
// check, and its certificate says what was refused, where, and by which
// of its processes; the files it tried are not there.
func TestDenialsKillAndRecord(t *testing.T) {
	if abi := rt.LandlockABI(); abi < landlock.LoggingABI {
		t.Skipf("the kernel's Landlock ABI is %d; logging denials after an execve needs %d (Linux 6.15)", abi, landlock.LoggingABI)
	}
	testaudit.Enable(t)
	r, err := denials.Open()
	require.NoError(t, err)
	defer r.Close()

	dir := t.TempDir()
	a := agentWith(config.Checks{Denials: &config.Limit{Kill: 4}})
	a.Checks.SampleInterval = 50 * time.Millisecond
	a.Writable = []string{dir}
	a.Command = []string{"/bin/sh", "-c", `i=0; while :; do i=$((i+1)); echo x > /etc/hermeskill-denied-$i; echo ok > ` + dir + `/ok; sleep 0.05; done`}
	run, err := startDenials(t, a, func() (*denials.Reader, error) { return r, nil })
	require.NoError(t, err)
	out := run.Wait()
	require.True(t, out.Killed)
	require.Equal(t, symptoms.Denials, out.Trigger.Check)
	require.Contains(t, out.Trigger.Message, "accesses refused by its confinement (kill threshold 4)")
	require.NoError(t, out.CertErr)

	c, _, err := certs.Read(out.CertPath)
	require.NoError(t, err)
	require.Equal(t, "denials", c.TriggerCheck)
	require.NotNil(t, c.Denials)
	require.GreaterOrEqual(t, c.Denials.Count, 4)
	// by_blocker counts the records read (the audit log may lose some
	// under load), count the kernel's own total once the domain is gone.
	require.Len(t, c.Denials.ByBlocker, 1)
	require.LessOrEqual(t, c.Denials.ByBlocker["fs.make_reg"], c.Denials.Count)
	require.Positive(t, c.Denials.ByBlocker["fs.make_reg"])
	require.NotEmpty(t, c.Denials.Recent)
	require.Equal(t, "/etc", c.Denials.Recent[0].Target)
	require.Equal(t, c.PID, c.Denials.Recent[0].PID)
	require.FileExists(t, filepath.Join(dir, "ok"))
	_, err = os.Stat("/etc/hermeskill-denied-1")
	require.ErrorIs(t, err, os.ErrNotExist)
}

// A check that could never fire must not pass for one that holds: with
// checks.denials and no way to count them, the agent is not started.
func TestDenialsCheckRefusedWhenUncountable(t *testing.T) {
	a := agentWith(config.Checks{Denials: &config.Limit{Kill: 1}})
	a.Writable = []string{t.TempDir()}
	a.Command = []string{"/bin/true"}
	for name, open := range map[string]func() (*denials.Reader, error){
		"audit off":    func() (*denials.Reader, error) { return nil, denials.ErrDisabled },
		"no reader":    nil,
		"no privilege": func() (*denials.Reader, error) { return nil, denials.ErrPermission },
	} {
		t.Run(name, func(t *testing.T) {
			_, err := startDenials(t, a, open)
			require.ErrorIs(t, err, errNoDenials)
			require.Contains(t, err.Error(), "the agent is not started")
		})
	}
	// Without the check, an uncountable run starts (its certificate then
	// has no denials).
	b := agentWith(config.Checks{})
	b.Writable, b.Command = a.Writable, a.Command
	run, err := startDenials(t, b, func() (*denials.Reader, error) { return nil, denials.ErrDisabled })
	require.NoError(t, err)
	require.False(t, run.Wait().Killed)
}
