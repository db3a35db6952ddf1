// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package supervisor

import (
	"bytes"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/certs"
	"github.com/hermeskill/hermeskilld/internal/config"
	"github.com/hermeskill/hermeskilld/internal/escalate"
	"github.com/hermeskill/hermeskilld/internal/fault"
	"github.com/hermeskill/hermeskilld/internal/symptoms"
	"github.com/hermeskill/hermeskilld/internal/testchild"
)

// readyWriter is an agent's stdout; ready is closed once the agent
// printed testchild's readiness line (its signal handlers are set).
type readyWriter struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	ready chan struct{}
	once  sync.Once
}

func (w *readyWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if bytes.Contains(w.buf.Bytes(), []byte("ready")) {
		w.once.Do(func() { close(w.ready) })
	}
	return len(p), nil
}

// Every kind of kill of an agent behind the gateway records the same
// shutdown log, in the same order: the revocation first, then the whole
// ladder (the agent ignores SIGINT and SIGTERM). A check's kill in shadow
// mode records nothing was sent; an operator's kill is real there too.
func TestRunKillSteps(t *testing.T) {
	gw := newGateway(t)
	full := []string{escalate.StepRevoked, escalate.StepCoopSignal, escalate.StepCoopWait, escalate.StepSIGTERM,
		escalate.StepTermWait, escalate.StepSIGKILL, escalate.StepMainExited, escalate.StepReaped}
	for _, tc := range []struct {
		name   string
		checks config.Checks
		mode   config.Mode
		kill   func(r *Run) // nil: the check kills
		check  symptoms.Check
		shadow bool   // a shadow certificate precedes the kill
		panics string // the component that panics (fault.Inject)
		want   []string
	}{
		{name: "automatic", checks: config.Checks{StartupTimeout: time.Second}, check: symptoms.StartupTimeout},
		{name: "manual", kill: func(r *Run) { r.Kill("ops", "test") }, check: symptoms.Manual},
		{name: "internal_error", kill: func(r *Run) { r.Fail(&fault.Error{Component: fault.Slot, Panic: "test"}) },
			check: symptoms.InternalError},
		{name: "shadow", checks: config.Checks{StartupTimeout: time.Second}, mode: config.ModeShadow,
			kill: func(r *Run) { r.Kill("ops", "after the shadow kill") }, check: symptoms.Manual, shadow: true},
		// The ladder panicked once the handle was revoked: SIGKILL of the
		// tree follows the revocation.
		{name: "ladder_panic", kill: func(r *Run) { r.Kill("ops", "test") }, check: symptoms.Manual, panics: fault.Ladder,
			want: []string{escalate.StepRevoked, escalate.StepSIGKILL, escalate.StepReaped}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := agentWith(tc.checks)
			if tc.mode != "" {
				a.Mode = tc.mode
			}
			a.Command = testchild.Spec("ignore-term").Argv
			a.Env = map[string]string{testchild.Env: "ignore-term"}
			a.Escalation.CoopGrace, a.Escalation.TermGrace = 100*time.Millisecond, 100*time.Millisecond
			if tc.panics != "" {
				panicIn(t, tc.panics, a.ID)
			}
			stdout := &readyWriter{ready: make(chan struct{})}
			r := startRealWith(t, a, func(o *Options) {
				o.Gateway = gw
				o.StdoutSink = stdout
			})
			select {
			case <-stdout.ready:
			case <-time.After(10 * time.Second):
				t.Fatal("the agent never got ready")
			}
			if tc.shadow {
				require.Eventually(t, func() bool { return len(r.Status().Symptoms) > 0 }, 10*time.Second, time.Millisecond)
			}
			if tc.kill != nil {
				tc.kill(r)
			}
			out := r.Wait()
			c := readCert(t, out)
			require.Equal(t, string(tc.check), c.TriggerCheck)
			require.Equal(t, certs.ModeEnforce, c.Mode)
			want := full
			if tc.want != nil {
				want = tc.want
			}
			require.Equal(t, want, stepsOf(c.ShutdownLog))
			require.Equal(t, "llm_requests_cut", keyOf(c.ShutdownLog[0].Detail))
			require.NotEmpty(t, c.ProcessTree, "the autopsy")
			if tc.shadow {
				require.Len(t, out.ShadowCerts, 1)
				sc, _, err := certs.Read(out.ShadowCerts[0])
				require.NoError(t, err)
				require.Equal(t, certs.ModeShadow, sc.Mode)
				require.Equal(t, string(symptoms.StartupTimeout), sc.TriggerCheck)
				require.Empty(t, sc.ShutdownLog, "nothing was sent")
			} else {
				require.Empty(t, out.ShadowCerts)
			}
		})
	}
}

// keyOf is the only key of m.
func keyOf(m map[string]any) string {
	for k := range m {
		if len(m) == 1 {
			return k
		}
	}
	return ""
}
