// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package heartbeat_test

import (
	"bytes"
	"encoding/hex"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/heartbeat"
)

// FuzzParse checks that Parse never panics and agrees with refParse, a
// straightforward model of the message format (see the package comment)
// written with the standard library.
// Seeds here and under testdata/fuzz/FuzzParse run with every `go test`.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"READY=1",
		"READY=1\nSTATUS=starting\nMAINPID=4242",
		"WATCHDOG=1\nPROGRESS=42",
		"WATCHDOG=trigger\nSTATUS=I am looping",
		"WATCHDOG=1\nWATCHDOG=trigger",
		"WATCHDOG_USEC=30000000\nEXTEND_TIMEOUT_USEC=5000000",
		"STOPPING=1\nSTATUS=bye",
		"ERRNO=110\nBARRIER=1",
		"TOKENS=1200\nCOST_USD=0.25",
		"TOOL=web_search\nTOOL_ARGS_SHA256=" + hash64,
		"ERROR=timeout\nDUMP_SIGNAL=SIGUSR2",
		"READY=1\r\nSTATUS=crlf\r\n",
		"READY=1\x00",
		"READY=1\x00STATUS=x",
		"STATUS=\xff",
		"PROGRESS=x\nPROGRESS=5",
		"COST_USD=NaN\nMAINPID=0\nERRNO=65536",
		"=\n\n==\nREADY\n",
		"STATUS=" + strings.Repeat("é", 600),
		"",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var m heartbeat.Message
		err := heartbeat.Parse(data, &m)

		body := data
		if n := len(body); n > 0 && body[n-1] == 0 {
			body = body[:n-1]
		}
		switch {
		case len(data) > heartbeat.MaxDatagram:
			require.ErrorIs(t, err, heartbeat.ErrOversize)
		case len(body) == 0:
			require.ErrorIs(t, err, heartbeat.ErrEmpty)
		case bytes.IndexByte(body, 0) >= 0:
			require.ErrorIs(t, err, heartbeat.ErrEmbedNUL)
		case !utf8.Valid(body):
			require.ErrorIs(t, err, heartbeat.ErrNotUTF8)
		default:
			require.NoError(t, err)
		}
		if err != nil {
			require.Equal(t, heartbeat.Message{}, m, "a rejected datagram leaves m reset")
			return
		}

		require.Equal(t, refParse(string(body)), m)
		if bytes.HasPrefix(data, []byte("READY=1\n")) {
			require.True(t, m.Has(heartbeat.FieldReady))
		}
		for _, s := range []string{m.Status, m.Error, m.Tool, m.DumpSignal} {
			require.LessOrEqual(t, len(s), heartbeat.MaxText)
			require.True(t, utf8.ValidString(s))
			require.NotContains(t, s, "\n")
		}

		// Parsing again into a used message gives the same result.
		m2 := m
		require.NoError(t, heartbeat.Parse(data, &m2))
		require.Equal(t, m, m2)
	})
}

// refParse models Parse for a valid datagram body: the first line of each
// known key decides it; an invalid value counts in BadFields and sets nothing.
func refParse(body string) heartbeat.Message {
	var m heartbeat.Message
	seen := map[string]bool{}
	for _, line := range strings.Split(body, "\n") {
		line = strings.TrimSuffix(line, "\r")
		key, val, ok := strings.Cut(line, "=")
		if !ok || key == "" || seen[key] {
			continue
		}
		f, ok := refValue(&m, key, val)
		if f == 0 && ok {
			continue // unknown key: not even "seen" matters
		}
		seen[key] = true
		if ok {
			m.Set(f)
		} else {
			m.BadFields++
		}
	}
	return m
}

// refValue validates and stores val; f == 0 with ok means an unknown key.
func refValue(m *heartbeat.Message, key, val string) (f heartbeat.Field, ok bool) {
	uintOf := func(s string) (uint64, bool) {
		if s == "" || strings.TrimLeft(s, "0123456789") != "" {
			return 0, false
		}
		n, err := strconv.ParseUint(s, 10, 64)
		return n, err == nil
	}
	capped := func(s string) string {
		if len(s) <= heartbeat.MaxText {
			return s
		}
		cut := heartbeat.MaxText
		for !utf8.RuneStart(s[cut]) {
			cut--
		}
		return s[:cut]
	}
	switch key {
	case "READY":
		return heartbeat.FieldReady, val == "1"
	case "STOPPING":
		return heartbeat.FieldStopping, val == "1"
	case "BARRIER":
		return heartbeat.FieldBarrier, val == "1"
	case "WATCHDOG":
		switch val {
		case "1":
			return heartbeat.FieldWatchdog, true
		case "trigger":
			return heartbeat.FieldTrigger, true
		}
		return heartbeat.FieldWatchdog, false
	case "WATCHDOG_USEC":
		n, ok := uintOf(val)
		if ok {
			m.WatchdogUSec = n
		}
		return heartbeat.FieldWatchdogUSec, ok
	case "EXTEND_TIMEOUT_USEC":
		n, ok := uintOf(val)
		if ok {
			m.ExtendTimeoutUSec = n
		}
		return heartbeat.FieldExtendTimeoutUSec, ok
	case "PROGRESS":
		n, ok := uintOf(val)
		if ok {
			m.Progress = n
		}
		return heartbeat.FieldProgress, ok
	case "TOKENS":
		n, ok := uintOf(val)
		if ok {
			m.Tokens = n
		}
		return heartbeat.FieldTokens, ok
	case "MAINPID":
		n, ok := uintOf(val)
		ok = ok && n >= 1 && n <= 4194303
		if ok {
			m.MainPID = int(n)
		}
		return heartbeat.FieldMainPID, ok
	case "ERRNO":
		n, ok := uintOf(val)
		ok = ok && n <= 65535
		if ok {
			m.Errno = int(n)
		}
		return heartbeat.FieldErrno, ok
	case "COST_USD":
		v, err := strconv.ParseFloat(val, 64)
		ok := err == nil && v >= 0 && v < 1e15
		if ok {
			m.CostUSD = v
		}
		return heartbeat.FieldCostUSD, ok
	case "STATUS":
		m.Status = capped(val)
		return heartbeat.FieldStatus, true
	case "ERROR":
		m.Error = capped(val)
		return heartbeat.FieldError, true
	case "TOOL":
		if val == "" {
			return heartbeat.FieldTool, false
		}
		m.Tool = capped(val)
		return heartbeat.FieldTool, true
	case "DUMP_SIGNAL":
		if val == "" {
			return heartbeat.FieldDumpSignal, false
		}
		m.DumpSignal = capped(val)
		return heartbeat.FieldDumpSignal, true
	case "TOOL_ARGS_SHA256":
		if _, err := hex.DecodeString(val); err != nil || len(val) != 64 {
			return heartbeat.FieldToolArgsSHA256, false
		}
		m.ToolArgsSHA256 = val
		return heartbeat.FieldToolArgsSHA256, true
	}
	return 0, true
}
