// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package client

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseDirective(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      string
		stop    *StopError
		warning string
	}{
		{"stop", "STOP=1\nCHECK=memory\nREASON=rss 2GiB\nGRACE_USEC=1500000",
			&StopError{Check: "memory", Reason: "rss 2GiB", Grace: 1500 * time.Millisecond}, ""},
		{"stop only", "STOP=1", &StopError{}, ""},
		{"kill event id", "STOP=1\nCHECK=cost\nREASON=r\nGRACE_USEC=2000000\nKILL_EVENT_ID=0193d5d8-7c4b-7a3e-9f21-0c5b1e2d3f40",
			&StopError{Check: "cost", Reason: "r", Grace: 2 * time.Second, KillEventID: "0193d5d8-7c4b-7a3e-9f21-0c5b1e2d3f40"}, ""},
		{"kill event id first", "KILL_EVENT_ID=a\nSTOP=1\nKILL_EVENT_ID=b", &StopError{KillEventID: "a"}, ""},
		{"not STOP=1", "STOP=0\nCHECK=memory", nil, ""},
		{"first key wins", "STOP=1\nCHECK=a\nCHECK=b\nSTOP=0", &StopError{Check: "a"}, ""},
		{"CRLF and junk", "junk\r\nSTOP=1\r\nREASON=x=y\r\n\n", &StopError{Reason: "x=y"}, ""},
		{"bad grace", "STOP=1\nGRACE_USEC=soon", &StopError{}, ""},
		{"huge grace", "STOP=1\nGRACE_USEC=99999999999999999999", &StopError{Grace: maxDuration}, ""},
		{"warning", "WARNING=cost: $4.10 over $4.00", nil, "cost: $4.10 over $4.00"},
		{"empty", "", nil, ""},
		{"unknown keys", "HELLO=1\nSTOP", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stop, warning := parseDirective([]byte(tc.in))
			require.Equal(t, tc.stop, stop)
			require.Equal(t, tc.warning, warning)
		})
	}
}

func TestStopErrorMessage(t *testing.T) {
	require.Equal(t, "hermeskilld stop", (&StopError{}).Error())
	require.Equal(t, "hermeskilld stop: manual", (&StopError{Check: "manual"}).Error())
}

func TestAppendText(t *testing.T) {
	require.Equal(t, "a b c", string(appendText(nil, "a\nb\rc")))
	long := strings.Repeat("é", maxText) // 2 bytes each
	got := appendText(nil, long)
	require.Len(t, got, maxText)
	require.Equal(t, long[:maxText], string(got))
	require.Equal(t, strings.Repeat("x", maxText-1), string(appendText(nil, strings.Repeat("x", maxText-1)+"€")))
}
