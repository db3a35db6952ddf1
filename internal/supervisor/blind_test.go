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
	f.sampleErr, f.sampleOK, f.fdsErr = nil, s, nil
}

// sampleWithoutFDs samples s, whose descriptors could not be counted
// for err.
func (f *fakeEffects) sampleWithoutFDs(s symptoms.Sample, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s.HaveFDs = false
	f.sampleErr, f.sampleOK, f.fdsErr = nil, s, err
}

// errFDsEACCES is a count of descriptors refused, as the sampler words
// it: the fd directory of a process hermeskilld may not ptrace.
var errFDsEACCES = fmt.Errorf("fd 42: %w", os.NewSyscallError("open", unix.EACCES))

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

// A tree whose descriptors cannot be counted blinds the fds check only:
// memory, procs and cpu_spin go on judging (a memory kill kills on its
// own reason, not internal_error), the run is not failed closed for
// checks that see, and Status says the fds check is blind.
func TestLoopBlindFDsOnly(t *testing.T) {
	t.Run("the other checks judge", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			a := agentWith(config.Checks{Memory: &config.Sustained{Kill: 1 << 30}, FDs: &config.Sustained{Warn: 100}})
			a.Checks.SampleInterval = time.Second
			core, logs := observer.New(zapcore.InfoLevel)
			h := startLoopLog(t, a, nil, zap.New(core))
			began := time.Now()
			h.fake.sampleWithoutFDs(symptoms.Sample{RSSBytes: 1 << 20, Procs: 3}, errFDsEACCES)
			time.Sleep(5 * time.Minute)
			synctest.Wait()
			require.Empty(t, h.ladders(), "failed closed for checks that see")
			st := h.status()
			require.EqualValues(t, 1<<20, st.Sample.RSSBytes)
			require.False(t, st.Sample.HaveFDs)
			e := st.SamplerError
			require.NotNil(t, e)
			require.Equal(t, "fd 42: open: permission denied", e.Err)
			require.True(t, e.BlindSince.IsZero(), "the kernel checks are not blind")
			require.Equal(t, began.Add(time.Second), e.FDsBlindSince)
			require.EqualValues(t, 300, e.Failures)
			errs := logs.FilterLevelExact(zapcore.ErrorLevel).All()
			require.Len(t, errs, 5, "once a minute")
			require.Equal(t, "the fds check cannot count the agent's descriptors; the other kernel checks see", errs[0].Message)

			// Memory over its kill threshold: killed for memory.
			h.fake.sampleWithoutFDs(symptoms.Sample{RSSBytes: 2 << 30, Procs: 3}, errFDsEACCES)
			time.Sleep(time.Second)
			synctest.Wait()
			l := h.ladders()
			require.Len(t, l, 1)
			require.Equal(t, symptoms.Memory, l[0].Check)
			h.fake.result <- escalate.Result{Empty: true}
			require.Equal(t, symptoms.Memory, (<-h.out).Trigger.Check)
		})
	})
	t.Run("counted again", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			core, logs := observer.New(zapcore.InfoLevel)
			a := agentWith(config.Checks{FDs: &config.Sustained{Kill: 1000}})
			a.Checks.SampleInterval = time.Second
			h := startLoopLog(t, a, nil, zap.New(core))
			h.fake.sampleWithoutFDs(symptoms.Sample{RSSBytes: 1 << 20, Procs: 3}, errFDsEACCES)
			time.Sleep(20 * time.Second)
			synctest.Wait()
			h.fake.sampleWith(symptoms.Sample{RSSBytes: 1 << 20, Procs: 3, FDs: 7, HaveFDs: true})
			time.Sleep(time.Second)
			synctest.Wait()
			e := h.status().SamplerError
			require.True(t, e.FDsBlindSince.IsZero(), "counting again")
			require.Len(t, logs.FilterMessage("the fds check counts the agent's descriptors again").All(), 1)
			require.Empty(t, logs.FilterMessage("kernel checks sample the agent's processes again").All(), "they never stopped")
			require.Equal(t, 7, h.status().Sample.FDs)

			h.fake.sampleWithoutFDs(symptoms.Sample{RSSBytes: 1 << 20, Procs: 3}, errFDsEACCES)
			time.Sleep(30 * time.Second)
			synctest.Wait()
			require.Empty(t, h.ladders(), "a new stretch: 29s blind, not 50s")
			h.l.kills <- killReq{operator: "test", reason: "done"}
			synctest.Wait()
			h.fake.result <- escalate.Result{Empty: true}
			<-h.out
		})
	})
	t.Run("fds kill fails closed", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			a := agentWith(config.Checks{Memory: &config.Sustained{Kill: 1 << 30}, FDs: &config.Sustained{Kill: 1000}})
			a.Checks.SampleInterval = time.Second
			h := start(t, a)
			first := time.Now().Add(time.Second)
			h.fake.sampleWithoutFDs(symptoms.Sample{RSSBytes: 1 << 20, Procs: 3}, errFDsEACCES)
			time.Sleep(time.Second + 30*time.Second - time.Nanosecond)
			synctest.Wait()
			require.Empty(t, h.ladders(), "blind for 29s: a warning only")
			time.Sleep(time.Nanosecond)
			synctest.Wait()
			l := h.ladders()
			require.Len(t, l, 1)
			require.Equal(t, symptoms.InternalError, l[0].Check)
			require.Equal(t, first.Add(30*time.Second), l[0].At)
			require.Equal(t, "fds check blind for 30s: fd 42: open: permission denied", l[0].Message)
			h.fake.result <- escalate.Result{Empty: true}
			<-h.out
		})
	})
	t.Run("a full failure then the descriptors", func(t *testing.T) {
		// Blind for everything 10s, then for the descriptors 20s: the
		// fds check has been blind 30s, and its kill fails closed.
		synctest.Test(t, func(t *testing.T) {
			a := agentWith(config.Checks{FDs: &config.Sustained{Kill: 1000}})
			a.Checks.SampleInterval = time.Second
			h := start(t, a)
			h.fake.failSamples(errEMFILE)
			time.Sleep(10 * time.Second)
			synctest.Wait()
			h.fake.sampleWithoutFDs(symptoms.Sample{RSSBytes: 1 << 20, Procs: 3}, errFDsEACCES)
			time.Sleep(21 * time.Second)
			synctest.Wait()
			require.True(t, h.status().SamplerError.BlindSince.IsZero())
			l := h.ladders()
			require.Len(t, l, 1)
			require.Equal(t, "fds check blind for 30s: fd 42: open: permission denied", l[0].Message)
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
