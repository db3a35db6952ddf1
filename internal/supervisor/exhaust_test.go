// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package supervisor

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"golang.org/x/sys/unix"

	"github.com/hermeskill/hermeskilld/internal/config"
	"github.com/hermeskill/hermeskilld/internal/fdreserve"
	"github.com/hermeskill/hermeskilld/internal/symptoms"
	"github.com/hermeskill/hermeskilld/internal/testchild"
)

// exhaustEnv marks the re-executed test binary that runs out of
// descriptors itself: a full table would break every other test.
const exhaustEnv = "HK_SUPERVISOR_EXHAUST"

// With hermeskilld out of descriptors, a real agent's kernel checks
// cannot sample its tree: the failure is logged (once), counted and in
// the run's Status, and the checks blind past their bound with a kill
// threshold kill the agent for internal_error — on the kill path's
// reserve, with its certificate.
func TestSamplerOutOfDescriptors(t *testing.T) {
	if os.Getenv(exhaustEnv) == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestSamplerOutOfDescriptors$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), exhaustEnv+"=1")
		b, err := cmd.CombinedOutput()
		t.Logf("%s", b)
		require.NoError(t, err, "the exhausted run failed")
		require.Contains(t, string(b), "--- PASS: TestSamplerOutOfDescriptors")
		return
	}
	// Low, so the table fills fast; the Go runtime raised the soft limit
	// to the hard one at start.
	require.NoError(t, unix.Setrlimit(unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: 256, Max: 256}))

	a := agentWith(config.Checks{Memory: &config.Sustained{Kill: 1 << 40}})
	a.Checks.SampleInterval = 50 * time.Millisecond
	a.Command = testchild.Spec("hang").Argv
	a.Env = map[string]string{testchild.Env: "hang"}
	a.Escalation.CoopGrace, a.Escalation.TermGrace = 200*time.Millisecond, 200*time.Millisecond
	core, logs := observer.New(zapcore.InfoLevel)
	before := SamplerFailures(SamplerDescriptors)
	r := startRealWith(t, a, func(o *Options) {
		o.Log = zap.New(core)
		o.blindAfter = 2 * time.Second // long enough to see the warning first on a loaded machine
	})
	require.Eventually(t, func() bool { return r.Status().Sample.Procs > 0 }, 10*time.Second, 5*time.Millisecond,
		"a first good sample")
	require.Nil(t, r.Status().SamplerError)

	release := fillTable(t)
	defer release()
	require.Eventually(t, func() bool {
		e := r.Status().SamplerError
		return e != nil && e.Failures >= 2
	}, 10*time.Second, 5*time.Millisecond)
	st := r.Status()
	require.Equal(t, StateRunning, st.State, "blind for less than the bound: a warning only")
	e := st.SamplerError
	require.Contains(t, e.Err, "too many open files")
	require.False(t, e.BlindSince.IsZero())
	require.GreaterOrEqual(t, SamplerFailures(SamplerDescriptors)-before, e.Failures)

	out := r.Wait()
	release()
	require.Equal(t, symptoms.InternalError, out.Trigger.Check, "%+v", out.Trigger)
	require.True(t, strings.HasPrefix(out.Trigger.Message, "kernel checks blind for "), out.Trigger.Message)
	require.Contains(t, out.Trigger.Message, "too many open files")
	require.False(t, alive(r.PID()), "the agent is killed")
	c := readCert(t, out)
	require.Equal(t, string(symptoms.InternalError), c.TriggerCheck)
	require.Nil(t, c.InternalError, "no panic: nothing to carry")

	failed := logs.FilterMessage("kernel checks cannot sample the agent's processes").All()
	require.Len(t, failed, 1, "once a minute, however many samples failed")
	require.Equal(t, zapcore.ErrorLevel, failed[0].Level)
	require.Contains(t, failed[0].ContextMap()["error"], "too many open files")
	require.Greater(t, r.Status().SamplerError.Failures, uint64(2))
}

// fillTable takes every free descriptor, as a flood would; the kill
// path's reserve stays held. release gives them back (idempotent).
func fillTable(t *testing.T) (release func()) {
	t.Helper()
	require.NoError(t, fdreserve.Hold())
	var fds []int
	for {
		fd, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			require.True(t, fdreserve.Exhausted(err), "%v", err)
			break
		}
		fds = append(fds, fd)
	}
	return func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
		fds = nil
	}
}
