// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package config

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// addFixtures seeds a fuzz target with every testdata file.
func addFixtures(f *testing.F, dirs ...string) {
	for _, dir := range dirs {
		files, err := filepath.Glob(filepath.Join("testdata", dir, "*.yaml"))
		require.NoError(f, err)
		require.NotEmpty(f, files)
		for _, file := range files {
			data, err := os.ReadFile(file)
			require.NoError(f, err)
			f.Add(data)
		}
	}
}

// requireConfigError checks the shape of every parse error of data:
// invalid configuration errors only, each naming the source, and the line
// in it (one of data's) wherever the error is at a place in the file: an
// unknown key, a syntax error in a readable file.
func requireConfigError(t *testing.T, err error, source string, data []byte) {
	require.ErrorIs(t, err, ErrInvalid)
	errs := []error{err}
	if _, one := err.(*Error); !one {
		errs = err.(interface{ Unwrap() []error }).Unwrap() // errors.Join
	}
	for _, e := range errs {
		var ce *Error
		require.True(t, errors.As(e, &ce), "%T: %v", e, e)
		require.Equal(t, source, ce.File)
		require.GreaterOrEqual(t, ce.Line, 0)
		require.LessOrEqual(t, ce.Line, lastLine(data), "a line of the file: %v", ce)
		require.NotNil(t, ce.Err)
		readable := len(data) <= maxFileSize && utf8.Valid(data)
		if ce.Kind == ErrUnknownKey || ce.Kind == ErrSyntax && readable {
			require.Positive(t, ce.Line, "located: %v", ce)
		}
		prefix := source + ": "
		if ce.Line > 0 {
			prefix = source + ":" + strconv.Itoa(ce.Line) + ": "
		}
		require.True(t, strings.HasPrefix(ce.Error(), prefix), "%q names %q", ce.Error(), prefix)
		if ce.Kind == 0 {
			require.Regexp(t, `^\d+ more errors not shown$`, ce.Err.Error())
		}
	}
}

func FuzzParseAgent(f *testing.F) {
	addFixtures(f, "agent", "daemon")
	f.Add([]byte("a: &a [*a]\ncommand: *a\n"))
	f.Add([]byte("checks: {tool_loop: 3, memory: {kill: 1.5GiB}}\n"))
	defs := &Defaults{}
	if d, err := LoadDaemon("testdata/daemon/ok-full.yaml"); err == nil {
		defs = &d.Defaults
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, dd := range []*Defaults{nil, defs} {
			a, err := ParseAgent(data, "a.yaml", dd)
			if err != nil {
				requireConfigError(t, err, "a.yaml", data)
				continue
			}
			// What parsing accepted, Validate accepts too: the two layers
			// of validation agree.
			a.Normalize()
			require.NoError(t, a.Validate(false))
		}
	})
}

func FuzzParseDaemon(f *testing.F) {
	addFixtures(f, "daemon", "agent")
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := ParseDaemon(data, "hk.yaml")
		if err != nil {
			requireConfigError(t, err, "hk.yaml", data)
			return
		}
		// Accepted defaults make a valid (empty) agent file.
		a, err := ParseAgent(nil, "a.yaml", &d.Defaults)
		require.NoError(t, err)
		a.Normalize()
		require.NoError(t, a.Validate(false))
		require.NotEmpty(t, d.EstopFile)
	})
}

func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"4096", "512MiB", "2GiB", "1.5GiB", "100MB", "64KiB", "0", "2Gb", "-1", ".5KiB", "8EiB", "9223372036854775807", "1.999999999999TiB", " 3 KB "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseSize(s)
		if err != nil {
			return
		}
		require.GreaterOrEqual(t, n, int64(0))
		// FormatSize's output parses back within its rounding (one decimal).
		if n < 1<<62 {
			back, err := ParseSize(FormatSize(n))
			require.NoError(t, err, FormatSize(n))
			diff := float64(back - n)
			require.LessOrEqual(t, diff, 0.05*float64(n)+1, "%d -> %s -> %d", n, FormatSize(n), back)
			require.GreaterOrEqual(t, diff, -0.05*float64(n)-1, "%d -> %s -> %d", n, FormatSize(n), back)
		}
	})
}

func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{"0", "1.5s", "300ms", "2h45m", "30", "-5s", "1µs", "9223372036854775807ns", "2562047h", ".5m"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDuration(s)
		if err != nil {
			return
		}
		require.GreaterOrEqual(t, d, time.Duration(0))
		back, err := ParseDuration(FormatDuration(d))
		require.NoError(t, err)
		require.Equal(t, d, back)
	})
}

func FuzzParseSignal(f *testing.F) {
	for _, s := range []string{"SIGINT", "int", "2", "none", "SIGRTMIN", "0", "+9"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sig, err := ParseSignal(s)
		if err != nil {
			return
		}
		back, err := ParseSignal(SignalName(sig))
		require.NoError(t, err)
		require.Equal(t, sig, back)
	})
}
