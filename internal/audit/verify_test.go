// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package audit

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tamper returns a copy of the 10-line log ls changed by fn, which gets the lines 1-based
// (index 0 is unused).
func tamper(ls [][]byte, fn func(ls [][]byte) [][]byte) []byte {
	c := [][]byte{nil}
	for _, l := range ls {
		c = append(c, bytes.Clone(l))
	}
	c = fn(c)[1:]
	return append(bytes.Join(c, []byte("\n")), '\n')
}

func TestVerifyFindsTampering(t *testing.T) {
	ls := lines(writeLog(t, logPath(t), 10))
	tests := []struct {
		name   string
		fn     func(ls [][]byte) [][]byte
		line   int
		reason string
	}{
		{
			// The line itself still parses and links back: the line after it names the edit.
			name: "one byte of a middle line, JSON intact",
			fn: func(ls [][]byte) [][]byte {
				ls[5] = bytes.Replace(ls[5], []byte(`"bot"`), []byte(`"bou"`), 1)
				return ls
			},
			line: 6, reason: "edited or reordered: prev_sha256 does not match line 5",
		},
		{
			// What a hand edit with sed '2s/"/'"'"'/' does.
			name: "one byte of a middle line, JSON broken",
			fn: func(ls [][]byte) [][]byte {
				ls[2] = bytes.Replace(ls[2], []byte(`"`), []byte(`'`), 1)
				return ls
			},
			line: 2, reason: "not JSON",
		},
		{
			name: "a middle line deleted",
			fn:   func(ls [][]byte) [][]byte { return append(ls[:5], ls[6:]...) },
			line: 5, reason: "deleted line(s): seq jumps from 4 to 6",
		},
		{
			name: "two lines swapped",
			fn: func(ls [][]byte) [][]byte {
				ls[4], ls[5] = ls[5], ls[4]
				return ls
			},
			line: 4, reason: "reordered: lines 4 and 5 swapped (seq 5 before seq 4)",
		},
		{
			name: "a line moved two places down",
			fn: func(ls [][]byte) [][]byte {
				ls[4], ls[5], ls[6] = ls[5], ls[6], ls[4]
				return ls
			},
			line: 4, reason: "reordered: seq 4 is at line 6, after seq 5",
		},
		{
			name: "a line moved up",
			fn: func(ls [][]byte) [][]byte {
				ls[4], ls[5], ls[6] = ls[6], ls[4], ls[5]
				return ls
			},
			line: 4, reason: "reordered: seq 4 is at line 5, after seq 6",
		},
		{
			name: "two lines deleted, later lines intact",
			fn:   func(ls [][]byte) [][]byte { return append(ls[:4], ls[6:]...) },
			line: 4, reason: "deleted line(s): seq jumps from 3 to 6",
		},
		{
			name: "an old line copied further down",
			fn: func(ls [][]byte) [][]byte {
				return append(ls[:6], append([][]byte{ls[3]}, ls[6:]...)...)
			},
			line: 6, reason: "reordered: seq goes back from 5 to 3",
		},
		{
			name: "a seq edited",
			fn: func(ls [][]byte) [][]byte {
				ls[5] = bytes.Replace(ls[5], []byte(`"seq":5,`), []byte(`"seq":9,`), 1)
				return ls
			},
			line: 5, reason: "edited: seq is 9, want 5",
		},
		{
			name: "a prev_sha256 recomputed after an edit",
			fn: func(ls [][]byte) [][]byte {
				old := hashLine(ls[5])
				ls[5] = bytes.Replace(ls[5], []byte(`"bot"`), []byte(`"bou"`), 1)
				ls[6] = bytes.Replace(ls[6], []byte(old), []byte(hashLine(ls[5])), 1)
				return ls
			},
			line: 7, reason: "edited or reordered: prev_sha256 does not match line 6",
		},
		{
			name: "a foreign JSON line",
			fn: func(ls [][]byte) [][]byte {
				ls[3] = []byte(`{"hello":"world"}`)
				return ls
			},
			line: 3, reason: "not an audit record: no seq",
		},
		{
			name: "a JSON array",
			fn: func(ls [][]byte) [][]byte {
				ls[3] = []byte(`[1,2]`)
				return ls
			},
			line: 3, reason: "not an audit record: not an object with a numeric seq and a string prev_sha256",
		},
		{
			name: "a line without prev_sha256",
			fn: func(ls [][]byte) [][]byte {
				ls[3] = []byte(`{"seq":3}`)
				return ls
			},
			line: 3, reason: "not an audit record: no prev_sha256",
		},
		{
			name: "an empty line",
			fn: func(ls [][]byte) [][]byte {
				return append(ls[:8], append([][]byte{{}}, ls[8:]...)...)
			},
			line: 8, reason: "not JSON",
		},
		{
			name: "an upper-case hash",
			fn: func(ls [][]byte) [][]byte {
				i := bytes.Index(ls[7], []byte(`"prev_sha256":"`)) + len(`"prev_sha256":"`)
				copy(ls[7][i:], bytes.ToUpper(ls[7][i:i+64]))
				return ls
			},
			line: 7, reason: "not an audit record: prev_sha256 is not 64 lowercase hex digits",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep, err := verify(bytes.NewReader(tamper(ls, tt.fn)))

			var broken *BrokenError
			require.ErrorAs(t, err, &broken)
			assert.Equal(t, &BrokenError{Line: tt.line, Reason: tt.reason}, broken)
			assert.Equal(t, tt.line-1, rep.Lines, "the report covers the lines before the break")
		})
	}
}

// The limits of the chain alone, pinned down: Check closes them with the anchor
// (TestCheckAgainstTheAnchor).
func TestVerifyCannotSee(t *testing.T) {
	ls := lines(writeLog(t, logPath(t), 10))
	tests := []struct {
		name      string
		fn        func(ls [][]byte) [][]byte
		firstSeq  uint64
		lastSeq   uint64
		firstPrev bool // zero hash
	}{
		{"the last line edited", func(ls [][]byte) [][]byte {
			ls[10] = bytes.Replace(ls[10], []byte(`"bot"`), []byte(`"bou"`), 1)
			return ls
		}, 1, 10, true},
		{"lines cut off the end", func(ls [][]byte) [][]byte { return ls[:8] }, 1, 7, true},
		{"lines cut off the start", func(ls [][]byte) [][]byte { return append(ls[:1], ls[4:]...) }, 4, 10, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep, err := verify(bytes.NewReader(tamper(ls, tt.fn)))

			require.NoError(t, err)
			assert.Equal(t, tt.firstSeq, rep.FirstSeq)
			assert.Equal(t, tt.lastSeq, rep.LastSeq)
			assert.Equal(t, tt.firstPrev, rep.FirstPrev == zeroHash, "FirstPrev tells a cut start")
		})
	}
}

func TestVerifyTornTail(t *testing.T) {
	good := writeLog(t, logPath(t), 3)
	last := lines(good)[2]
	tests := []struct {
		name  string
		data  string
		lines int
		torn  int64
	}{
		{"empty", "", 0, 0},
		{"intact", string(good), 3, 0},
		{"cut mid-line", string(good[:len(good)-10]), 2, int64(len(last)) + 1 - 10},
		{"no final newline", string(good[:len(good)-1]), 2, int64(len(last))},
		{"last line not JSON", string(good) + "{\"seq\n", 3, 6},
		{"last line not a record", string(good) + "{}\n", 3, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep, err := verify(strings.NewReader(tt.data))

			require.NoError(t, err)
			assert.Equal(t, tt.lines, rep.Lines)
			assert.Equal(t, tt.torn > 0, rep.TornTail)
			assert.Equal(t, tt.torn, rep.TornBytes)
		})
	}
}

func TestVerifyFromChecksTheLinkToThePreviousFile(t *testing.T) {
	ls := lines(writeLog(t, logPath(t), 10))
	join := func(ls [][]byte) *bytes.Reader {
		return bytes.NewReader(append(bytes.Join(ls, []byte("\n")), '\n'))
	}
	head, err := verify(join(ls[:5]))
	require.NoError(t, err)

	rep, err := verifyFrom(join(ls[5:]), head)
	require.NoError(t, err)
	assert.Equal(t, Report{Lines: 5, FirstSeq: 6, LastSeq: 10, FirstPrev: head.LastHash, LastHash: hashLine(ls[9])}, rep)

	_, err = verifyFrom(join(ls[6:]), head)
	assert.Equal(t, &BrokenError{Line: 1, Reason: "deleted line(s): seq jumps from 5 to 7"}, err)

	other, err := verify(join(lines(writeLog(t, logPath(t), 5))))
	require.NoError(t, err)
	_, err = verifyFrom(join(ls[5:]), other)
	assert.Equal(t, &BrokenError{
		Line: 1, Reason: "edited or reordered: prev_sha256 does not match the previous file's last line",
	}, err)
}

func TestVerifyReadError(t *testing.T) {
	boom := errors.New("boom")

	_, err := verify(iotest.ErrReader(boom))

	require.ErrorIs(t, err, boom)
	var broken *BrokenError
	assert.False(t, errors.As(err, &broken))
}
