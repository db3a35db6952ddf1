// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package heartbeat

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// frameAll feeds data to a fresh framer in pieces of size n and returns
// the messages and whether it refused the stream as oversize.
func frameAll(data string, n int) ([]string, bool) {
	var f framer
	var got []string
	for len(data) > 0 {
		k := min(n, len(data))
		if !f.feed([]byte(data[:k]), func(m []byte) { got = append(got, string(m)) }) {
			return got, false
		}
		data = data[k:]
	}
	return got, true
}

// The framer cuts the same messages whatever the reads' sizes.
func TestFramerSplits(t *testing.T) {
	stream := "\nREADY=1\nSTATUS=a\n\n\r\nWATCHDOG=1\r\n\r\nPROGRESS=2\n\n\n\nTOKENS=3\n\nSTATUS=unfinished\n"
	want := []string{"READY=1\nSTATUS=a", "WATCHDOG=1", "PROGRESS=2", "TOKENS=3"}
	for n := 1; n <= len(stream); n++ {
		got, ok := frameAll(stream, n)
		require.True(t, ok, "reads of %d", n)
		require.Equal(t, want, got, "reads of %d", n)
	}
}

// A message is measured as the datagram it stands for: 8 KiB, its last
// line's end left out ("\r\n" inside it counts as in a datagram), and one
// byte more is oversize, detected before its empty line.
func TestFramerLimit(t *testing.T) {
	lines := "STATUS=" + strings.Repeat("x", MaxDatagram-len("STATUS=")-len("\nA=1")) + "\nA=1"
	line := "STATUS=" + strings.Repeat("x", MaxDatagram-len("STATUS="))
	require.Len(t, lines, MaxDatagram)
	require.Len(t, line, MaxDatagram)
	for _, stream := range []string{lines + "\n\n", line + "\n\n", line + "\r\n\r\n", line + "\n\r\n"} {
		for _, n := range []int{1, 7, 4096, MaxDatagram + 10} {
			got, ok := frameAll(stream, n)
			require.True(t, ok, "%q…, reads of %d", stream[:8], n)
			require.Equal(t, []string{stream[:MaxDatagram]}, got)
		}
	}
	crlf := strings.ReplaceAll(lines, "\n", "\r\n") // 8 KiB + 1
	for _, over := range []string{"x" + lines + "\n\n", "x" + line + "\n", "x" + line, crlf + "\r\n\r\n"} {
		for _, n := range []int{1, 4096} {
			got, ok := frameAll(over, n)
			require.False(t, ok, "%d bytes in reads of %d", len(over), n)
			require.Empty(t, got)
		}
	}
}

// FuzzFramer: whatever the bytes and however the reads cut them, the
// framer yields the same messages, never one over MaxDatagram, none with
// an empty line inside.
func FuzzFramer(f *testing.F) {
	f.Add([]byte("READY=1\n\nWATCHDOG=1\r\n\r\n"), uint8(1))
	f.Add([]byte("\n\n\r\nA=1\nB=2\n\nC"), uint8(3))
	f.Add([]byte("\r\r\n\n\r"), uint8(2))
	f.Fuzz(func(t *testing.T, data []byte, cut uint8) {
		whole, okWhole := frameAll(string(data), len(data)+1)
		parts, okParts := frameAll(string(data), int(cut%16)+1)
		require.Equal(t, okWhole, okParts)
		if okWhole {
			require.Equal(t, whole, parts)
		}
		for _, m := range parts {
			require.LessOrEqual(t, len(m), MaxDatagram)
			require.NotEmpty(t, m)
			require.NotContains(t, m, "\n\n")
			require.NotContains(t, m, "\n\r\n")
		}
	})
}
