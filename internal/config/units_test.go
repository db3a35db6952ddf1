// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package config

import (
	"math"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseDuration(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		err  string
	}{
		{in: "0", want: 0},
		{in: "0s", want: 0},
		{in: "1.5s", want: 1500 * time.Millisecond},
		{in: "300ms", want: 300 * time.Millisecond},
		{in: "2h45m", want: 2*time.Hour + 45*time.Minute},
		{in: "10us", want: 10 * time.Microsecond},
		{in: " 5m ", want: 5 * time.Minute},
		{in: "30", err: `bad duration "30": missing unit (e.g. 30s)`},
		{in: "1.5", err: `bad duration "1.5": missing unit (e.g. 1.5s)`},
		{in: "-5s", err: `bad duration "-5s": negative`},
		{in: "5 s", err: `bad duration "5 s": want Go syntax such as 30s, 1.5s, 500ms, 2h30m`},
		{in: "5d", err: `bad duration "5d": want Go syntax such as 30s, 1.5s, 500ms, 2h30m`},
		{in: "", err: "empty duration"},
		{in: "off", err: `bad duration "off": want Go syntax such as 30s, 1.5s, 500ms, 2h30m`},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseDuration(tc.in)
			if tc.err != "" {
				require.EqualError(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestFormatDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0:                         "0",
		1500 * time.Millisecond:   "1.5s",
		time.Minute:               "1m",
		time.Hour:                 "1h",
		time.Hour + time.Minute:   "1h1m",
		90 * time.Second:          "1m30s",
		200 * time.Millisecond:    "200ms",
		2*time.Hour + time.Second: "2h0m1s",
	} {
		require.Equal(t, want, FormatDuration(d), "%d", d)
	}
}

func TestParseSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		err  string
	}{
		{in: "4096", want: 4096},
		{in: "0", want: 0},
		{in: "512B", want: 512},
		{in: "64KiB", want: 64 << 10},
		{in: "512MiB", want: 512 << 20},
		{in: "2GiB", want: 2 << 30},
		{in: "1.5GiB", want: 3 << 29},
		{in: "0.5KiB", want: 512},
		{in: ".5KiB", want: 512},
		{in: "1.3KiB", want: 1331}, // 1331.2, rounded down
		{in: "1TiB", want: 1 << 40},
		{in: "100MB", want: 100_000_000},
		{in: "1.5KB", want: 1500},
		{in: "2GB", want: 2_000_000_000},
		{in: "3TB", want: 3_000_000_000_000},
		{in: "2 GiB", want: 2 << 30},
		{in: "8388607TiB", want: 8388607 << 40},
		{in: "9223372036854775807", want: math.MaxInt64},
		{in: "2Gb", err: `bad size "2Gb": unknown unit "Gb" (want ` + sizeForms + `)`},
		{in: "2G", err: `bad size "2G": unknown unit "G" (want ` + sizeForms + `)`},
		{in: "2gib", err: `bad size "2gib": unknown unit "gib" (want ` + sizeForms + `)`},
		{in: "-1GiB", err: `bad size "-1GiB": negative`},
		{in: "1.5", err: `bad size "1.5": a number of bytes must be whole`},
		{in: "GiB", err: `bad size "GiB": want ` + sizeForms},
		{in: "", err: `bad size "": want ` + sizeForms},
		{in: ".", err: `bad size ".": want ` + sizeForms},
		{in: "1.2.3MiB", err: `bad size "1.2.3MiB": want ` + sizeForms},
		{in: "8388608TiB", err: `bad size "8388608TiB": too large`},
		{in: "9223372036854775808", err: `bad size "9223372036854775808": too large`},
		{in: "8388607.9999999999TiB", want: 8388607<<40 + 1099511626676}, // fraction cut to 9 digits
		{in: "1e9", err: `bad size "1e9": unknown unit "e9" (want ` + sizeForms + `)`},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseSize(tc.in)
			if tc.err != "" {
				require.EqualError(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestFormatSize(t *testing.T) {
	for _, tc := range []struct {
		in   int64
		want string
	}{
		{0, "0B"},
		{512, "512B"},
		{1023, "1023B"},
		{1024, "1KiB"},
		{1536, "1.5KiB"},
		{2 << 30, "2GiB"},
		{1288490189, "1.2GiB"},
		{1<<20 - 1, "1MiB"}, // 1023.999KiB rounds up into the next unit
		{1 << 40, "1TiB"},
		{1 << 50, "1PiB"},
		{math.MaxInt64, "8EiB"},
		{-1536, "-1.5KiB"},
		{math.MinInt64, "-8EiB"},
	} {
		require.Equal(t, tc.want, FormatSize(tc.in), "%d", tc.in)
	}
}

func TestParseSignal(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want syscall.Signal
		err  bool
	}{
		{in: "SIGINT", want: syscall.SIGINT},
		{in: "INT", want: syscall.SIGINT},
		{in: "int", want: syscall.SIGINT},
		{in: "SigTerm", want: syscall.SIGTERM},
		{in: "2", want: syscall.SIGINT},
		{in: "9", want: syscall.SIGKILL},
		{in: "31", want: syscall.SIGSYS},
		{in: "USR2", want: syscall.SIGUSR2},
		{in: "SIGQUIT", want: syscall.SIGQUIT},
		{in: "IOT", want: syscall.SIGABRT},
		{in: "SIGPOLL", want: syscall.SIGIO},
		{in: "cld", want: syscall.SIGCHLD},
		{in: " SIGSTKFLT ", want: syscall.SIGSTKFLT},
		{in: "none", want: 0},
		{in: "NONE", want: 0},
		{in: "0", err: true},
		{in: "32", err: true},
		{in: "-2", err: true},
		{in: "SIGFOO", err: true},
		{in: "SIG", err: true},
		{in: "", err: true},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseSignal(tc.in)
			if tc.err {
				require.EqualError(t, err, `unknown signal "`+tc.in+`" (want a name such as SIGINT or INT, a number 1-31, or none)`)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestSignalNameRoundTrip(t *testing.T) {
	for sig := syscall.Signal(1); sig <= 31; sig++ {
		name := SignalName(sig)
		require.Regexp(t, `^SIG[A-Z0-9]+$`, name)
		got, err := ParseSignal(name)
		require.NoError(t, err)
		require.Equal(t, sig, got)
	}
	require.Equal(t, "none", SignalName(0))
	require.Equal(t, "signal 40", SignalName(40))
	require.Equal(t, "signal -1", SignalName(-1))
	// The names of signal(7), as statuses and certificates show them.
	var names []string
	for sig := syscall.Signal(1); sig <= 31; sig++ {
		names = append(names, SignalName(sig))
	}
	require.Equal(t, strings.Fields("SIGHUP SIGINT SIGQUIT SIGILL SIGTRAP SIGABRT SIGBUS SIGFPE SIGKILL SIGUSR1 SIGSEGV SIGUSR2 SIGPIPE SIGALRM SIGTERM "+
		"SIGSTKFLT SIGCHLD SIGCONT SIGSTOP SIGTSTP SIGTTIN SIGTTOU SIGURG SIGXCPU SIGXFSZ SIGVTALRM SIGPROF SIGWINCH SIGIO SIGPWR SIGSYS"), names)
	require.Equal(t, "SIGINT", SignalName(syscall.SIGINT))
	require.Equal(t, "SIGKILL", SignalName(syscall.SIGKILL))
}
