// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package supervisor

import (
	"errors"
	"fmt"
	"os"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"golang.org/x/sys/unix"

	"github.com/hermeskill/hermeskilld/internal/config"
	"github.com/hermeskill/hermeskilld/internal/escalate"
	"github.com/hermeskill/hermeskilld/internal/symptoms"
)

// errEMFILE is a sample's failure for want of descriptors, as the
// sampler words it.
var errEMFILE = fmt.Errorf("stat 42: %w", os.NewSyscallError("open", unix.EMFILE))

func (f *fakeEffects) failSamples(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sampleErr = err
}

func (f *fakeEffects) sampleWith(s symptoms.Sample) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sampleErr, f.sampleOK = nil, s
}

// memoryKill is an agent whose memory check kills, sampled every iv.
func memoryKill(iv time.Duration) *config.Agent {
	a := agentWith(config.Checks{Memory: &config.Sustained{Kill: 1 << 40}})
	a.Checks.SampleInterval = iv
	return a
}

// Kernel checks that cannot sample are never silent — one error log a
// minute, the last error in Status — and blind for 30s with a kill
// threshold they fail closed: internal_error, to the nanosecond.
func TestLoopBlindKernelChecksFailClosed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		core, logs := observer.New(zapcore.InfoLevel)
		h := startLoopLog(t, memoryKill(time.Second), nil, zap.New(core))
		h.fake.failSamples(errEMFILE)
		began := time.Now() // on a whole second: the first sample is in 1s
		first := began.Add(time.Second)

		time.Sleep(time.Second + 30*time.Second - time.Nanosecond)
		synctest.Wait()
		require.Empty(t, h.ladders(), "blind for 29s: a warning only")
		e := h.status().SamplerError
		require.NotNil(t, e)
		require.Equal(t, "stat 42: open: too many open files", e.Err)
		require.Equal(t, first, e.BlindSince)
		require.Equal(t, began.Add(30*time.Second), e.At)
		require.EqualValues(t, 30, e.Failures)
		errs := logs.FilterLevelExact(zapcore.ErrorLevel).All()
		require.Len(t, errs, 1, "rate-limited: once a minute")
		require.Equal(t, "kernel checks cannot sample the agent's processes", errs[0].Message)
		require.Equal(t, "stat 42: open: too many open files", errs[0].ContextMap()["error"])

		time.Sleep(time.Nanosecond)
		synctest.Wait()
		l := h.ladders()
		require.Len(t, l, 1)
		require.Equal(t, symptoms.InternalError, l[0].Check)
		require.Equal(t, symptoms.Terminal, l[0].Severity)
		require.Equal(t, first.Add(30*time.Second), l[0].At)
		require.Equal(t, "kernel checks blind for 30s: stat 42: open: too many open files", l[0].Message)
		require.Equal(t, symptoms.InternalError, h.status().Trigger.Check)

		h.fake.result <- escalate.Result{Reached: escalate.StageSIGTERM, Empty: true}
		out := <-h.out
		require.Equal(t, symptoms.InternalError, out.Trigger.Check)
	})
}

// The bound is three sample intervals when that is longer than 30s.
func TestLoopBlindBoundFollowsInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, memoryKill(20*time.Second))
		h.fake.failSamples(errEMFILE)
		time.Sleep(20*time.Second + 40*time.Second)
		synctest.Wait()
		require.Empty(t, h.ladders(), "blind for 40s of a 60s bound")
		time.Sleep(20 * time.Second)
		synctest.Wait()
		require.Len(t, h.ladders(), 1)
		require.Equal(t, "kernel checks blind for 1m0s: stat 42: open: too many open files", h.ladders()[0].Message)
		h.fake.result <- escalate.Result{Empty: true}
		<-h.out
	})
}

// Blindness kills only where it could let a runaway live: a kernel check
// with a kill threshold, in enforce mode. A good sample ends the stretch.
func TestLoopBlindWithoutKillOnlyWarns(t *testing.T) {
	for _, tc := range []struct {
		name  string
		agent func() *config.Agent
	}{
		{"warn threshold only", func() *config.Agent {
			return agentWith(config.Checks{Memory: &config.Sustained{Warn: 1 << 40}, Procs: &config.Sustained{Warn: 10}})
		}},
		{"no kernel check", func() *config.Agent { return agentWith(config.Checks{}) }},
		{"shadow mode", func() *config.Agent {
			a := memoryKill(time.Second)
			a.Mode = config.ModeShadow
			return a
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := start(t, tc.agent())
				h.fake.failSamples(errEMFILE)
				time.Sleep(5 * time.Minute)
				synctest.Wait()
				require.Empty(t, h.ladders())
				require.NotNil(t, h.status().SamplerError)
				require.False(t, h.status().SamplerError.BlindSince.IsZero())
				h.l.kills <- killReq{operator: "test", reason: "done"}
				synctest.Wait()
				h.fake.result <- escalate.Result{Empty: true}
				<-h.out
			})
		})
	}
	t.Run("recovered", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			core, logs := observer.New(zapcore.InfoLevel)
			h := startLoopLog(t, memoryKill(time.Second), nil, zap.New(core))
			h.fake.failSamples(errEMFILE)
			time.Sleep(20 * time.Second)
			synctest.Wait()
			h.fake.sampleWith(symptoms.Sample{RSSBytes: 1 << 20, Procs: 1})
			time.Sleep(time.Second)
			synctest.Wait()
			e := h.status().SamplerError
			require.NotNil(t, e, "the last error stays in Status")
			require.True(t, e.BlindSince.IsZero(), "seeing again")
			require.EqualValues(t, 1<<20, h.status().Sample.RSSBytes)
			require.Len(t, logs.FilterMessage("kernel checks sample the agent's processes again").All(), 1)

			h.fake.failSamples(errors.Join(errEMFILE, fmt.Errorf("stat 43: %w", os.NewSyscallError("open", unix.EMFILE))))
			time.Sleep(30 * time.Second)
			synctest.Wait()
			require.Empty(t, h.ladders(), "a new stretch: 29s blind, not 50s")
			e = h.status().SamplerError
			require.Equal(t, "stat 42: open: too many open files (and 1 more)", e.Err)
			require.EqualValues(t, 20+30, e.Failures)
			require.Len(t, logs.FilterLevelExact(zapcore.ErrorLevel).All(), 1, "within the minute of the first log")
			time.Sleep(time.Second)
			synctest.Wait()
			require.Len(t, h.ladders(), 1)
			h.fake.result <- escalate.Result{Empty: true}
			<-h.out
		})
	})
}

func TestSamplerReason(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{errEMFILE, SamplerDescriptors},
		{fmt.Errorf("list /proc: %w", os.NewSyscallError("open", unix.ENFILE)), SamplerDescriptors},
		{errors.Join(errors.New("stat 7: malformed"), errEMFILE), SamplerDescriptors},
		{fmt.Errorf("fd 42: %w", os.NewSyscallError("open", unix.EACCES)), SamplerPermission},
		{fmt.Errorf("fd 42: %w", unix.EPERM), SamplerPermission},
		{errors.New("stat 42: malformed proc file"), SamplerOther},
	} {
		require.Equal(t, tc.want, samplerReason(tc.err), "%v", tc.err)
	}
}
