// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package symptoms

import (
	"encoding/binary"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/config"
	"github.com/hermeskill/hermeskilld/internal/heartbeat"
)

// input reads a fuzz input; past its end every read is 0.
type input struct{ b []byte }

func (r *input) u8() byte {
	if len(r.b) == 0 {
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *input) u64() uint64 {
	var buf [8]byte
	n := copy(buf[:], r.b)
	r.b = r.b[n:]
	return binary.LittleEndian.Uint64(buf[:])
}

// dur is 0 (off) or a multiple of 250ms up to a few seconds.
func (r *input) dur() time.Duration { return time.Duration(r.u8()%16) * 250 * time.Millisecond }

func (r *input) small() int64 { return int64(r.u8() % 8) }

// usec is a WATCHDOG_USEC or EXTEND_TIMEOUT_USEC value, edge cases included.
func (r *input) usec() uint64 {
	switch r.u8() % 6 {
	case 0:
		return 0
	case 1:
		return math.MaxUint64
	case 2:
		return r.u64()
	default:
		return uint64(r.u8()) * 50_000 // up to 12.75s
	}
}

func (r *input) config() Config {
	var c config.Checks
	c.StartupTimeout, c.HeartbeatTimeout = r.dur(), r.dur()
	c.HeartbeatTimeoutMin, c.HeartbeatTimeoutMax = r.dur(), r.dur()
	c.ProgressTimeout, c.MaxRuntime = r.dur()*4, r.dur()*8
	on := r.u8()
	if on&1 != 0 {
		c.Memory = &config.Sustained{Warn: r.small(), Kill: r.small(), For: r.dur()}
	}
	if on&2 != 0 {
		c.Procs = &config.Sustained{Warn: r.small(), Kill: r.small(), For: r.dur()}
	}
	if on&4 != 0 {
		c.FDs = &config.Sustained{Warn: r.small(), Kill: r.small(), For: r.dur()}
	}
	if on&8 != 0 {
		c.CPUSpin = &config.CPUSpin{Percent: float64(r.u8() % 4 * 50), For: r.dur(), OnlyWithoutProgress: r.u8()&1 != 0}
	}
	if on&16 != 0 {
		c.Tokens = &config.Limit{Warn: r.small() * 10, Kill: r.small() * 10}
	}
	if on&32 != 0 {
		c.Cost = &config.CostLimit{Warn: float64(r.small()) / 4, Kill: float64(r.small()) / 4}
	}
	if on&64 != 0 {
		c.ErrorStreak = &config.Limit{Warn: r.small(), Kill: r.small()}
		c.Steps = &config.Limit{Warn: r.small() * 4, Kill: r.small() * 4}
	}
	if on&128 != 0 {
		c.ToolLoop = &config.ToolLoop{Repeats: int(r.u8() % 6)}
	}
	c.MaxExtension = r.dur() * 4 // 0: the default
	cfg := Config{Checks: c, StopTimeout: r.dur(), Shadow: r.u8()&1 != 0}
	on = r.u8()
	if on&1 != 0 {
		cfg.CostRate = &config.CostRate{Warn: float64(r.small()) / 4, Kill: float64(r.small()) / 4, Per: time.Second + r.dur()*4}
	}
	if on&2 != 0 {
		cfg.RequestsRate = &config.Rate{Warn: r.small(), Kill: r.small(), Per: time.Second + r.dur()*4}
	}
	if on&4 != 0 {
		cfg.TokensRate = &config.Rate{Warn: r.small() * 10, Kill: r.small() * 10, Per: time.Second + r.dur()*4}
	}
	cfg.Metered = on&8 != 0
	return cfg
}

func (r *input) message() *heartbeat.Message {
	m := new(heartbeat.Message)
	fields := uint32(r.u8()) | uint32(r.u8())<<8 | uint32(r.u8())<<16
	set := func(f heartbeat.Field) bool {
		if fields&uint32(f) == 0 {
			return false
		}
		m.Set(f)
		return true
	}
	set(heartbeat.FieldReady)
	set(heartbeat.FieldWatchdog)
	if r.u8()%8 == 0 { // rarely: it ends the run
		set(heartbeat.FieldTrigger)
	}
	if set(heartbeat.FieldWatchdogUSec) {
		m.WatchdogUSec = r.usec()
	}
	if set(heartbeat.FieldExtendTimeoutUSec) {
		m.ExtendTimeoutUSec = r.usec()
	}
	if set(heartbeat.FieldStatus) {
		m.Status = strings.Repeat("s", int(r.u8()%4))
	}
	if r.u8()%4 == 0 {
		set(heartbeat.FieldStopping)
	}
	if set(heartbeat.FieldMainPID) {
		m.MainPID = int(r.u8())
	}
	if set(heartbeat.FieldErrno) {
		m.Errno = int(r.u8())
	}
	set(heartbeat.FieldBarrier)
	if set(heartbeat.FieldProgress) {
		m.Progress = uint64(r.u8() % 64)
		if m.Progress == 63 {
			m.Progress = math.MaxUint64
		}
	}
	if set(heartbeat.FieldTokens) {
		m.Tokens = uint64(r.u8())
		if m.Tokens == 255 {
			m.Tokens = math.MaxUint64
		}
	}
	if set(heartbeat.FieldCostUSD) {
		m.CostUSD = float64(r.u8()) / 64
	}
	if set(heartbeat.FieldTool) {
		m.Tool = []string{"a", "b", "c"}[r.u8()%3]
	}
	if set(heartbeat.FieldToolArgsSHA256) {
		m.ToolArgsSHA256 = strings.Repeat(string('0'+rune(r.u8()%2)), 64)
	}
	if set(heartbeat.FieldError) {
		m.Error = "e"
	}
	if set(heartbeat.FieldDumpSignal) {
		m.DumpSignal = "SIGUSR1"
	}
	return m
}

func (r *input) sample() Sample {
	return Sample{RSSBytes: r.small(), CPUPercent: float64(r.u8() % 4 * 50), Procs: int(r.small()),
		FDs: int(r.small()), HaveFDs: r.u8()&1 != 0}
}

// FuzzEngine drives an engine with random configs, messages, samples,
// ticks, live edits, manual kills and the wire's requests and responses
// at non-decreasing times, and checks
// after every step what the supervisor relies on:
//   - a symptom is dated now, and every returned symptom is logged (while
//     the log has room) and nothing else is;
//   - Terminal, once set, never changes, is the first terminal symptom
//     returned, and is in the log; each check (but manual) fires at most
//     once, and never warns after it fired;
//   - while no terminal fired, or in shadow mode until a manual kill,
//     NextDeadline is strictly after the last now given (so a timer armed
//     for it is never in the past); otherwise nothing is armed;
//   - a Tick at or after NextDeadline fires, a Tick before it does not,
//     and so does the deadline check that opens Observe, ObserveSample,
//     RequestSent and ResponseEnded.
func FuzzEngine(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("\x04\x04\x01\x10\x04\x08\xff\x03\x02\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x04\x02\x04"))
	f.Add(slices.Repeat([]byte{0x08, 0x0c, 0x02, 0x14, 0x10, 0x20, 0xff, 1, 2, 3, 4, 5, 6, 7, 8, 9}, 8))
	f.Add(slices.Repeat([]byte{0x03, 0x06, 0x00, 0x03, 0x05, 0x01, 0xa0, 0x00, 0x02, 0x00}, 16))
	f.Add(slices.Repeat([]byte{0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x10, 0x20, 0x40, 0x80}, 12))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := &input{data}
		now := time.Now()
		cfg := r.config()
		e := New(cfg, now)
		var (
			term     *Symptom
			log      []Symptom
			warnings int
			killed   bool // by Manual
		)
		for step := 0; len(r.b) > 0 && step < 500; step++ {
			now = now.Add(time.Duration(r.u8()%32) * 100 * time.Millisecond)
			prevAt, armed := e.NextDeadline()
			op := r.u8() % 10
			if op == 7 { // a timer: exactly at the deadline, or a hair before
				if armed {
					now = later(now, prevAt.Add(-time.Duration(r.u8()%2)))
				}
				op = 2
			}
			passed := armed && !now.Before(prevAt)
			var syms []Symptom
			var first bool
			switch op {
			case 0, 1:
				syms = e.Observe(r.message(), now)
			case 2:
				syms = e.Tick(now)
				if !passed {
					require.Empty(t, syms, "Tick before the deadline %s", prevAt)
				}
			case 3, 4:
				syms = e.ObserveSample(r.sample(), now)
			case 5:
				cfg = r.config()
				syms = e.Reconfigure(cfg, now)
			case 6:
				var s Symptom
				s, first = e.Manual("op", "why", now)
				syms = []Symptom{s}
				killed = true
				require.Equal(t, term == nil, first)
			case 8:
				syms = e.RequestSent(now)
			case 9:
				syms = e.ResponseEnded(r.u8()&1 != 0, now)
			}

			// The deadline that passed fired, and first.
			if passed && op != 5 && op != 6 {
				require.NotEmpty(t, syms, "deadline %s passed at %s", prevAt, now)
				require.Equal(t, Terminal, syms[0].Severity)
				require.Contains(t, []Check{StartupTimeout, HeartbeatTimeout, ProgressTimeout, MaxRuntime, StopTimeout}, syms[0].Check)
			}
			for _, s := range syms {
				requireTime(t, now, s.At)
				require.Contains(t, []Severity{Warning, Terminal}, s.Severity)
				require.NotEmpty(t, s.Check)
				require.NotEmpty(t, s.Message)
				if s.Severity == Warning {
					warnings++
				}
			}

			// Terminal: the first terminal symptom ever returned.
			got, ok := e.Terminal()
			if term != nil {
				require.True(t, ok)
				require.Equal(t, *term, got, "Terminal changed")
			} else if i := slices.IndexFunc(syms, func(s Symptom) bool { return s.Severity == Terminal }); i >= 0 {
				require.True(t, ok)
				require.Equal(t, syms[i], got)
				term = &got
			} else {
				require.False(t, ok, "a terminal symptom that was not returned: %+v", got)
			}

			// Deadlines.
			at, ok := e.NextDeadline()
			if term != nil && (!cfg.Shadow || killed) {
				require.False(t, ok, "armed at %s after a terminal symptom", at)
			} else if ok {
				require.True(t, at.After(now), "deadline %s not after now %s", at, now)
			}

			// The log: what was returned, appended.
			next := e.Log()
			require.LessOrEqual(t, len(next), maxLog)
			require.True(t, slices.Equal(log, next[:len(log)]), "the log was rewritten")
			if want := append(slices.Clone(log), syms...); len(want) < maxLog-1 {
				require.True(t, slices.Equal(want, next), "log %+v, want %+v", next, want)
			}
			log = next
			require.Equal(t, warnings, e.State().Warnings)
		}

		// Over the whole run.
		fired := map[Check]bool{}
		for _, s := range log {
			if s.Severity == Terminal && s.Check != Manual {
				require.False(t, fired[s.Check], "%s fired twice", s.Check)
				fired[s.Check] = true
			}
			if s.Severity == Warning {
				require.False(t, fired[s.Check], "%s warned after it fired", s.Check)
			}
		}
		if term != nil {
			require.Contains(t, log, *term, "the terminal symptom is not in the log")
		}
	})
}
