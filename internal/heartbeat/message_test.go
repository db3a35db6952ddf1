// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package heartbeat_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/heartbeat"
)

const hash64 = "6802a7c2b17e87b4a48247e8a05a547826899abba22624e4123454068da8f6eb"

// allFields lists every known field, for "nothing else is set" checks.
var allFields = []heartbeat.Field{
	heartbeat.FieldReady, heartbeat.FieldWatchdog, heartbeat.FieldTrigger,
	heartbeat.FieldWatchdogUSec, heartbeat.FieldExtendTimeoutUSec, heartbeat.FieldStatus,
	heartbeat.FieldStopping, heartbeat.FieldMainPID, heartbeat.FieldErrno, heartbeat.FieldBarrier,
	heartbeat.FieldProgress, heartbeat.FieldTokens, heartbeat.FieldCostUSD, heartbeat.FieldTool,
	heartbeat.FieldToolArgsSHA256, heartbeat.FieldError, heartbeat.FieldDumpSignal,
}

// want builds the expected message: the fields of set, plus values.
func want(set []heartbeat.Field, values func(*heartbeat.Message)) heartbeat.Message {
	var m heartbeat.Message
	for _, f := range set {
		m.Set(f)
	}
	if values != nil {
		values(&m)
	}
	return m
}

func parse(t *testing.T, data string) heartbeat.Message {
	t.Helper()
	var m heartbeat.Message
	require.NoError(t, heartbeat.Parse([]byte(data), &m))
	return m
}

func TestParseKnownKeys(t *testing.T) {
	F := func(f ...heartbeat.Field) []heartbeat.Field { return f }
	for _, tc := range []struct {
		name, data string
		want       heartbeat.Message
	}{
		{"READY", "READY=1", want(F(heartbeat.FieldReady), nil)},
		{"WATCHDOG=1", "WATCHDOG=1", want(F(heartbeat.FieldWatchdog), nil)},
		{"WATCHDOG=trigger", "WATCHDOG=trigger", want(F(heartbeat.FieldTrigger), nil)},
		{"WATCHDOG_USEC", "WATCHDOG_USEC=30000000", want(F(heartbeat.FieldWatchdogUSec),
			func(m *heartbeat.Message) { m.WatchdogUSec = 30_000_000 })},
		{"WATCHDOG_USEC max", "WATCHDOG_USEC=18446744073709551615", want(F(heartbeat.FieldWatchdogUSec),
			func(m *heartbeat.Message) { m.WatchdogUSec = 1<<64 - 1 })},
		{"EXTEND_TIMEOUT_USEC", "EXTEND_TIMEOUT_USEC=5000000", want(F(heartbeat.FieldExtendTimeoutUSec),
			func(m *heartbeat.Message) { m.ExtendTimeoutUSec = 5_000_000 })},
		{"STATUS", "STATUS=indexing 3/10 ✓", want(F(heartbeat.FieldStatus),
			func(m *heartbeat.Message) { m.Status = "indexing 3/10 ✓" })},
		{"STATUS with '='", "STATUS=a=b", want(F(heartbeat.FieldStatus),
			func(m *heartbeat.Message) { m.Status = "a=b" })},
		{"STATUS empty", "STATUS=", want(F(heartbeat.FieldStatus), nil)},
		{"STOPPING", "STOPPING=1", want(F(heartbeat.FieldStopping), nil)},
		{"MAINPID", "MAINPID=4242", want(F(heartbeat.FieldMainPID),
			func(m *heartbeat.Message) { m.MainPID = 4242 })},
		{"MAINPID max", "MAINPID=4194303", want(F(heartbeat.FieldMainPID),
			func(m *heartbeat.Message) { m.MainPID = 4194303 })},
		{"ERRNO", "ERRNO=110", want(F(heartbeat.FieldErrno), func(m *heartbeat.Message) { m.Errno = 110 })},
		{"ERRNO zero", "ERRNO=0", want(F(heartbeat.FieldErrno), nil)},
		{"BARRIER", "BARRIER=1", want(F(heartbeat.FieldBarrier), nil)},
		{"PROGRESS", "PROGRESS=42", want(F(heartbeat.FieldProgress), func(m *heartbeat.Message) { m.Progress = 42 })},
		{"PROGRESS leading zeros", "PROGRESS=007", want(F(heartbeat.FieldProgress), func(m *heartbeat.Message) { m.Progress = 7 })},
		{"TOKENS", "TOKENS=1200", want(F(heartbeat.FieldTokens), func(m *heartbeat.Message) { m.Tokens = 1200 })},
		{"COST_USD", "COST_USD=0.25", want(F(heartbeat.FieldCostUSD), func(m *heartbeat.Message) { m.CostUSD = 0.25 })},
		{"COST_USD integer", "COST_USD=5", want(F(heartbeat.FieldCostUSD), func(m *heartbeat.Message) { m.CostUSD = 5 })},
		{"TOOL", "TOOL=web_search\nTOOL_ARGS_SHA256=" + hash64,
			want(F(heartbeat.FieldTool, heartbeat.FieldToolArgsSHA256), func(m *heartbeat.Message) {
				m.Tool, m.ToolArgsSHA256 = "web_search", hash64
			})},
		{"TOOL_ARGS_SHA256 upper case", "TOOL_ARGS_SHA256=" + strings.ToUpper(hash64),
			want(F(heartbeat.FieldToolArgsSHA256), func(m *heartbeat.Message) { m.ToolArgsSHA256 = strings.ToUpper(hash64) })},
		{"ERROR", "ERROR=timeout after 30s", want(F(heartbeat.FieldError), func(m *heartbeat.Message) { m.Error = "timeout after 30s" })},
		{"DUMP_SIGNAL", "DUMP_SIGNAL=SIGUSR2", want(F(heartbeat.FieldDumpSignal), func(m *heartbeat.Message) { m.DumpSignal = "SIGUSR2" })},
		{"Python client beat", "WATCHDOG=1\nPROGRESS=17\nTOKENS=9000\nCOST_USD=0.125",
			want(F(heartbeat.FieldWatchdog, heartbeat.FieldProgress, heartbeat.FieldTokens, heartbeat.FieldCostUSD),
				func(m *heartbeat.Message) { m.Progress, m.Tokens, m.CostUSD = 17, 9000, 0.125 })},
		{"trigger with status", "WATCHDOG=trigger\nSTATUS=I am looping",
			want(F(heartbeat.FieldTrigger, heartbeat.FieldStatus), func(m *heartbeat.Message) { m.Status = "I am looping" })},
		{"trailing newline", "READY=1\n", want(F(heartbeat.FieldReady), nil)},
		{"one trailing NUL", "READY=1\nSTATUS=x\x00", want(F(heartbeat.FieldReady, heartbeat.FieldStatus),
			func(m *heartbeat.Message) { m.Status = "x" })},
		{"CRLF lines", "READY=1\r\nSTATUS=hi\r\nPROGRESS=3\r\n", want(F(heartbeat.FieldReady, heartbeat.FieldStatus, heartbeat.FieldProgress),
			func(m *heartbeat.Message) { m.Status, m.Progress = "hi", 3 })},
		{"only one CR is a line end", "STATUS=hi\r\r", want(F(heartbeat.FieldStatus), func(m *heartbeat.Message) { m.Status = "hi\r" })},
		{"unknown keys ignored", "FOO=bar\nNOTIFYACCESS=all\nready=1\nREADY =1\nREADY=1\nX-HERMES=1",
			want(F(heartbeat.FieldReady), nil)},
		{"lines without '=' ignored", "hello\n\n=1\nREADY\nREADY=1", want(F(heartbeat.FieldReady), nil)},
		{"no known key", "FOO=1", heartbeat.Message{}},
		{"blank lines only", "\n\n\r\n", heartbeat.Message{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, parse(t, tc.data))
		})
	}
}

func TestParseDuplicatesFirstWins(t *testing.T) {
	m := parse(t, "STATUS=first\nPROGRESS=1\nSTATUS=second\nPROGRESS=2\nTOOL=a\nTOOL=b\nMAINPID=10\nMAINPID=20")
	require.Equal(t, "first", m.Status)
	require.Equal(t, uint64(1), m.Progress)
	require.Equal(t, "a", m.Tool)
	require.Equal(t, 10, m.MainPID)
	require.Zero(t, m.BadFields, "a later duplicate is ignored, not bad")

	// WATCHDOG is one key with two meanings: its first line alone decides.
	m = parse(t, "WATCHDOG=1\nWATCHDOG=trigger")
	require.True(t, m.Has(heartbeat.FieldWatchdog))
	require.False(t, m.Has(heartbeat.FieldTrigger), "a duplicate WATCHDOG= must not also trigger a kill")
	m = parse(t, "WATCHDOG=trigger\nWATCHDOG=1")
	require.True(t, m.Has(heartbeat.FieldTrigger))
	require.False(t, m.Has(heartbeat.FieldWatchdog))

	// A bad first occurrence is the one that counts: the key is ignored.
	m = parse(t, "PROGRESS=x\nPROGRESS=5\nREADY=0\nREADY=1\nWATCHDOG=2\nWATCHDOG=1")
	require.False(t, m.Has(heartbeat.FieldProgress))
	require.Zero(t, m.Progress)
	require.False(t, m.Has(heartbeat.FieldReady))
	require.False(t, m.Has(heartbeat.FieldWatchdog))
	require.Equal(t, 3, m.BadFields)
}

func TestParseBadValues(t *testing.T) {
	for _, line := range []string{
		"READY=0", "READY=", "READY=1 ", "READY=true",
		"WATCHDOG=0", "WATCHDOG=", "WATCHDOG=TRIGGER", "WATCHDOG=1\r\r",
		"WATCHDOG_USEC=", "WATCHDOG_USEC=-1", "WATCHDOG_USEC=+5", "WATCHDOG_USEC=1e6", "WATCHDOG_USEC= 5",
		"WATCHDOG_USEC=18446744073709551616", "WATCHDOG_USEC=000000000000000000001", "WATCHDOG_USEC=٣",
		"EXTEND_TIMEOUT_USEC=x",
		"STOPPING=0", "STOPPING=yes",
		"MAINPID=0", "MAINPID=-1", "MAINPID=4194304", "MAINPID=abc",
		"ERRNO=-1", "ERRNO=65536", "ERRNO=EIO",
		"BARRIER=0",
		"PROGRESS=-1", "PROGRESS=1.5", "PROGRESS=0x10",
		"TOKENS=lots",
		"COST_USD=", "COST_USD=-0.01", "COST_USD=NaN", "COST_USD=Inf", "COST_USD=+Inf", "COST_USD=1e15",
		"COST_USD=1e400", "COST_USD=$5",
		"TOOL=",
		"TOOL_ARGS_SHA256=", "TOOL_ARGS_SHA256=" + hash64[:63], "TOOL_ARGS_SHA256=" + hash64 + "0",
		"TOOL_ARGS_SHA256=" + hash64[:63] + "g",
		"DUMP_SIGNAL=",
	} {
		t.Run(line, func(t *testing.T) {
			// The bad field is ignored and counted; the rest is kept.
			m := parse(t, "STATUS=kept\n"+line+"\nPROGRESS=9")
			require.Equal(t, 1, m.BadFields)
			require.Equal(t, "kept", m.Status)
			if !strings.HasPrefix(line, "PROGRESS=") {
				require.True(t, m.Has(heartbeat.FieldProgress))
				require.Equal(t, uint64(9), m.Progress)
			}
			// Nothing but the good fields is set, and no bad value leaks
			// into the struct.
			good := want([]heartbeat.Field{heartbeat.FieldStatus}, func(m *heartbeat.Message) { m.Status = "kept" })
			if m.Has(heartbeat.FieldProgress) {
				good.Set(heartbeat.FieldProgress)
				good.Progress = 9
			}
			good.BadFields = 1
			require.Equal(t, good, m)
		})
	}
}

func TestParseRejects(t *testing.T) {
	for _, tc := range []struct {
		name string
		data []byte
		err  error
	}{
		{"nil", nil, heartbeat.ErrEmpty},
		{"empty", []byte{}, heartbeat.ErrEmpty},
		{"only a NUL", []byte{0}, heartbeat.ErrEmpty},
		{"embedded NUL", []byte("READY=1\x00STATUS=x"), heartbeat.ErrEmbedNUL},
		{"two trailing NULs", []byte("READY=1\x00\x00"), heartbeat.ErrEmbedNUL},
		{"leading NUL", []byte("\x00READY=1"), heartbeat.ErrEmbedNUL},
		{"invalid UTF-8", []byte("READY=1\nSTATUS=\xff\xfe"), heartbeat.ErrNotUTF8},
		{"truncated rune", []byte("STATUS=\xc3"), heartbeat.ErrNotUTF8},
		{"surrogate", []byte("STATUS=\xed\xa0\x80"), heartbeat.ErrNotUTF8},
		{"oversize", []byte("READY=1\n" + strings.Repeat("x", heartbeat.MaxDatagram)), heartbeat.ErrOversize},
		{"oversize by one even with a trailing NUL", append([]byte("STATUS="+strings.Repeat("x", heartbeat.MaxDatagram-7)), 0), heartbeat.ErrOversize},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := parse(t, "READY=1\nSTATUS=stale\nFOO\nPROGRESS=x") // Parse must reset m
			require.ErrorIs(t, heartbeat.Parse(tc.data, &m), tc.err)
			require.True(t, m.Empty())
			require.Equal(t, heartbeat.Message{}, m)
		})
	}

	// Exactly MaxDatagram bytes is accepted.
	data := "READY=1\nX=" + strings.Repeat("y", heartbeat.MaxDatagram-10)
	require.Len(t, data, heartbeat.MaxDatagram)
	m := parse(t, data)
	require.True(t, m.Has(heartbeat.FieldReady))
}

func TestParseTextCap(t *testing.T) {
	x := strings.Repeat("x", heartbeat.MaxText)
	for _, tc := range []struct{ name, value, want string }{
		{"at the cap", x, x},
		{"over the cap", x + "tail", x},
		{"two-byte rune across the cap", x[:heartbeat.MaxText-1] + "é", x[:heartbeat.MaxText-1]},
		{"three-byte rune across the cap", x[:heartbeat.MaxText-2] + "€", x[:heartbeat.MaxText-2]},
		{"four-byte rune across the cap", x[:heartbeat.MaxText-1] + "🔥", x[:heartbeat.MaxText-1]},
		{"rune ending at the cap", x[:heartbeat.MaxText-2] + "é" + "more", x[:heartbeat.MaxText-2] + "é"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := parse(t, "STATUS="+tc.value+"\nERROR="+tc.value+"\nTOOL="+tc.value+"\nDUMP_SIGNAL="+tc.value)
			require.Zero(t, m.BadFields)
			for _, got := range []string{m.Status, m.Error, m.Tool, m.DumpSignal} {
				require.Equal(t, tc.want, got)
			}
		})
	}
}

func TestParseAllocs(t *testing.T) {
	data := []byte("WATCHDOG=1\nPROGRESS=42")
	var m heartbeat.Message
	allocs := testing.AllocsPerRun(1000, func() {
		if err := heartbeat.Parse(data, &m); err != nil {
			panic(err)
		}
	})
	require.Zero(t, allocs)
	require.True(t, m.Has(heartbeat.FieldWatchdog))
	require.Equal(t, uint64(42), m.Progress)

	// The other numeric and flag keys do not allocate either.
	data = []byte("READY=1\nWATCHDOG_USEC=30000000\nEXTEND_TIMEOUT_USEC=1\nSTOPPING=1\nMAINPID=7\nERRNO=5\nTOKENS=9\nBARRIER=1\nUNKNOWN=1")
	require.Zero(t, testing.AllocsPerRun(1000, func() { _ = heartbeat.Parse(data, &m) }))
}

func TestMessageHelpers(t *testing.T) {
	var m heartbeat.Message
	require.True(t, m.Empty())
	for _, f := range allFields {
		require.False(t, m.Has(f))
	}
	m.Set(heartbeat.FieldProgress)
	require.False(t, m.Empty())
	require.True(t, m.Has(heartbeat.FieldProgress))
	require.False(t, m.Has(heartbeat.FieldTokens))
	m.Status = "x"
	m.Reset()
	require.Equal(t, heartbeat.Message{}, m)
}

func BenchmarkParse(b *testing.B) {
	for _, bc := range []struct{ name, data string }{
		{"beat", "WATCHDOG=1\nPROGRESS=42"},
		{"full", "WATCHDOG=1\nPROGRESS=1234\nTOKENS=987654\nCOST_USD=1.25\nTOOL=web_search\nTOOL_ARGS_SHA256=" + hash64 + "\nSTATUS=step 3 of 10"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			data := []byte(bc.data)
			var m heartbeat.Message
			b.ReportAllocs()
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if err := heartbeat.Parse(data, &m); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
