// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package audit

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// check runs Check on files (the last one's anchor beside it) and returns the results.
func check(t *testing.T, opts CheckOptions, files ...string) []FileResult {
	t.Helper()
	if opts.Anchor == "" {
		opts.Anchor = AnchorPath(files[len(files)-1])
	}
	res, err := Check(files, opts)
	require.NoError(t, err)
	require.NotEmpty(t, res)
	return res
}

// checkOK asserts that files verify as one chain, the last against its anchor.
func checkOK(t *testing.T, files ...string) []FileResult {
	t.Helper()
	res := check(t, CheckOptions{}, files...)
	require.Len(t, res, len(files))
	for _, r := range res {
		require.NoError(t, r.Err, r.Path)
		require.Empty(t, r.Mismatches, r.Path)
		require.True(t, r.OK())
	}
	last := res[len(res)-1]
	require.NotNil(t, last.Anchor)
	assert.Equal(t, last.Report.LastSeq, last.Anchor.Seq)
	return res
}

// lastResult is the result of the last file Check reached.
func lastResult(res []FileResult) FileResult { return res[len(res)-1] }

func TestCheckIntactLog(t *testing.T) {
	path := logPath(t)
	ls := lines(writeLog(t, path, 10))

	res := checkOK(t, path)

	r := res[0]
	assert.Equal(t, 10, r.Report.Lines)
	assert.Equal(t, &Anchor{Head: Head{Seq: 10, SHA256: hashLine(ls[9])}, FirstSeq: 1, FirstPrev: zeroHash}, r.Anchor)
}

// TestCheckAgainstTheAnchor: what the chain alone cannot see (TestVerifyCannotSee), the
// anchor shows, by name.
func TestCheckAgainstTheAnchor(t *testing.T) {
	path := logPath(t)
	ls := lines(writeLog(t, path, 10))
	anchor, err := os.ReadFile(AnchorPath(path))
	require.NoError(t, err)
	tests := []struct {
		name   string
		fn     func(ls [][]byte) [][]byte
		kind   error
		line   int
		reason string
	}{
		{
			name: "last 2 lines dropped",
			fn:   func(ls [][]byte) [][]byte { return ls[:9] },
			kind: errTailCut, reason: "tail cut: seq 9-10 missing (the anchor ends at seq 10, the file at seq 8)",
		},
		{
			name: "last line dropped",
			fn:   func(ls [][]byte) [][]byte { return ls[:10] },
			kind: errTailCut, reason: "tail cut: seq 10 missing (the anchor ends at seq 10, the file at seq 9)",
		},
		{
			name: "last line edited",
			fn: func(ls [][]byte) [][]byte {
				ls[10] = bytes.Replace(ls[10], []byte(`"bot"`), []byte(`"bou"`), 1)
				return ls
			},
			kind: errLineEdited, line: 10,
			reason: "edited: seq 10 is not the line anchored (its sha256 differs from the anchor's)",
		},
		{
			name:   "first line deleted",
			fn:     func(ls [][]byte) [][]byte { return append(ls[:1], ls[2:]...) },
			kind:   errFirstMissing,
			reason: "first line missing: seq 1 (the anchor says the file starts at seq 1, it starts at seq 2)",
		},
		{
			name:   "first 3 lines deleted",
			fn:     func(ls [][]byte) [][]byte { return append(ls[:1], ls[4:]...) },
			kind:   errFirstMissing,
			reason: "first line missing: seq 1-3 (the anchor says the file starts at seq 1, it starts at seq 4)",
		},
		{
			// Without the key, rewriting every hash after an edit only moves the
			// difference to the end.
			name: "first line edited, every later hash recomputed",
			fn: func(ls [][]byte) [][]byte {
				ls[1] = bytes.Replace(ls[1], []byte(`"bot"`), []byte(`"bou"`), 1)
				return rechain(ls)
			},
			kind: errLineEdited, line: 10,
			reason: "edited: seq 10 is not the line anchored (its sha256 differs from the anchor's)",
		},
		{
			name: "a line appended by hand, chained and numbered",
			fn: func(ls [][]byte) [][]byte {
				forged := `{"seq":11,"time":"2026-12-02T10:15:03Z","type":"operator_request","data":{"uid":0},"prev_sha256":"` + hashLine(ls[10]) + `"}`
				return append(ls, []byte(forged))
			},
			kind: errPastAnchor, line: 11,
			reason: "lines past the anchor: seq 11 (the anchor ends at seq 10)",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bad := filepath.Join(t.TempDir(), "audit.jsonl")
			require.NoError(t, os.WriteFile(bad, tamper(ls, tt.fn), 0o640))
			require.NoError(t, os.WriteFile(AnchorPath(bad), anchor, 0o640))

			r := lastResult(check(t, CheckOptions{}, bad))

			require.NoError(t, verifyErr(t, bad), "the chain alone holds")
			require.ErrorIs(t, r.Err, tt.kind)
			var ae *AnchorError
			require.ErrorAs(t, r.Err, &ae)
			assert.Equal(t, &AnchorError{Kind: tt.kind, Line: tt.line, Reason: tt.reason}, ae)
			assert.Nil(t, r.Anchor)
			assert.False(t, r.OK())
		})
	}

	t.Run("two lines swapped", func(t *testing.T) {
		bad := filepath.Join(t.TempDir(), "audit.jsonl")
		require.NoError(t, os.WriteFile(bad, tamper(ls, func(ls [][]byte) [][]byte {
			ls[6], ls[7] = ls[7], ls[6]
			return ls
		}), 0o640))
		require.NoError(t, os.WriteFile(AnchorPath(bad), anchor, 0o640))

		r := lastResult(check(t, CheckOptions{}, bad))

		assert.Equal(t, &BrokenError{Line: 6, Reason: "reordered: lines 6 and 7 swapped (seq 7 before seq 6)"}, r.Err)
	})
}

// rechain recomputes the prev_sha256 of every line after the first of ls (1-based), as
// someone rewriting the log would.
func rechain(ls [][]byte) [][]byte {
	for i := 2; i < len(ls); i++ {
		old := decodePrev(ls[i])
		ls[i] = bytes.Replace(ls[i], []byte(old), []byte(hashLine(ls[i-1])), 1)
	}
	return ls
}

func decodePrev(line []byte) string {
	l, _ := decodeLink(line)
	return l.prev
}

// verifyErr is verify's error for the file at path.
func verifyErr(t *testing.T, path string) error {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	_, err = verify(f)
	return err
}

func TestCheckAnchorFileProblems(t *testing.T) {
	path := logPath(t)
	writeLog(t, path, 3)

	t.Run("missing", func(t *testing.T) {
		res := check(t, CheckOptions{Anchor: filepath.Join(t.TempDir(), "none.anchor")}, path)
		require.ErrorIs(t, lastResult(res).Err, ErrNoAnchor)
		require.ErrorIs(t, lastResult(res).Err, os.ErrNotExist)
	})
	for name, content := range map[string]string{
		"empty":          "",
		"not JSON":       "{\"schema\":",
		"another schema": `{"schema":"x","seq":3,"sha256":"` + zeroHash + `","first_seq":1,"first_prev_sha256":"` + zeroHash + `"}`,
		"unknown member": `{"schema":"` + anchorSchema + `","seq":3,"sha256":"` + zeroHash + `","first_seq":1,"first_prev_sha256":"` + zeroHash + `","x":1}`,
		"seq 0":          `{"schema":"` + anchorSchema + `","seq":0,"sha256":"` + zeroHash + `","first_seq":0,"first_prev_sha256":"` + zeroHash + `"}`,
		"bad hash":       `{"schema":"` + anchorSchema + `","seq":3,"sha256":"ABC","first_seq":1,"first_prev_sha256":"` + zeroHash + `"}`,
		"two objects":    `{"schema":"` + anchorSchema + `","seq":3,"sha256":"` + zeroHash + `","first_seq":1,"first_prev_sha256":"` + zeroHash + `"} {}`,
	} {
		t.Run(name, func(t *testing.T) {
			a := filepath.Join(t.TempDir(), "audit.jsonl.anchor")
			require.NoError(t, os.WriteFile(a, []byte(content), 0o640))
			r := lastResult(check(t, CheckOptions{Anchor: a}, path))
			if content == "" {
				require.ErrorIs(t, r.Err, ErrNoAnchor)
				return
			}
			require.ErrorIs(t, r.Err, ErrBadAnchor)
		})
	}

	t.Run("an anchor kept elsewhere", func(t *testing.T) {
		elsewhere := filepath.Join(t.TempDir(), "copy.anchor")
		b, err := os.ReadFile(AnchorPath(path))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(elsewhere, b, 0o600))
		require.NoError(t, os.Remove(AnchorPath(path)))

		r := lastResult(check(t, CheckOptions{Anchor: elsewhere}, path))

		require.NoError(t, r.Err)
		require.NotNil(t, r.Anchor)
	})

	t.Run("the chain alone", func(t *testing.T) {
		res, err := Check([]string{path}, CheckOptions{})
		require.NoError(t, err)
		require.NoError(t, res[0].Err)
		assert.Nil(t, res[0].Anchor)
	})

	t.Run("a missing log", func(t *testing.T) {
		_, err := Check([]string{filepath.Join(t.TempDir(), "none.jsonl")}, CheckOptions{})
		require.ErrorIs(t, err, os.ErrNotExist)
	})
}

// killedWriter leaves path as a writer killed between writing its line and updating the
// anchor leaves it: one line more, the anchor of the line before.
func killedWriter(t *testing.T, path string) {
	t.Helper()
	before, err := os.ReadFile(AnchorPath(path))
	require.NoError(t, err)
	l := openLog(t, path, Options{})
	require.NoError(t, l.Append(Event{Type: "ladder_step", AgentID: "bot"}))
	require.NoError(t, l.Close())
	require.NoError(t, os.WriteFile(AnchorPath(path), before, 0o640))
}

func TestCrashBetweenLineAndAnchor(t *testing.T) {
	path := logPath(t)
	writeLog(t, path, 5)
	killedWriter(t, path)

	// Before any writer comes back: the unanchored line, by name.
	r := lastResult(check(t, CheckOptions{}, path))
	assert.Equal(t, &AnchorError{Kind: errPastAnchor, Line: 6, Reason: "lines past the anchor: seq 6 (the anchor ends at seq 5)"}, r.Err)

	// The next writer records what it found, then goes on: the log and its anchor agree
	// again, and the record stays in the chain.
	l := openLog(t, path, Options{})
	require.NoError(t, l.Append(writerEvent("bot", 5)))
	require.NoError(t, l.Close())
	ls := readLines(t, path)
	require.Len(t, ls, 8)
	rec := decode(t, ls[6])
	assert.Equal(t, typeAnchorMismatch, rec.Type)
	assert.EqualValues(t, 7, rec.Seq)
	assert.JSONEq(t, `{"cause":"lines_past_anchor",
		"anchor":{"seq":5,"sha256":"`+hashLine(ls[4])+`","first_seq":1,"first_prev_sha256":"`+zeroHash+`"},
		"log":{"seq":6,"sha256":"`+hashLine(ls[5])+`"}}`, string(rec.Data))

	res := check(t, CheckOptions{}, path)
	r = lastResult(res)
	require.NoError(t, r.Err, "the chain holds and ends at the anchor")
	require.Len(t, r.Mismatches, 1, "but the recorded mismatch is a failure until explained")
	assert.False(t, r.OK())
	m := r.Mismatches[0]
	assert.Equal(t, 7, m.Line)
	assert.EqualValues(t, 7, m.Seq)
	assert.Equal(t, "seq 6 had been written past the anchor (seq 5)", m.Data.String())

	r = lastResult(check(t, CheckOptions{Accept: []uint64{7}}, path))
	assert.True(t, r.OK(), "an operator accepted it")
	assert.Len(t, r.Report.Mismatches, 1, "still in the report")
}

func TestOpenRecordsWhatTheAnchorSays(t *testing.T) {
	tests := []struct {
		name   string
		damage func(t *testing.T, path string)
		want   string // the mismatch, in words
	}{
		{"no anchor (a log from before anchors)", func(t *testing.T, path string) {
			require.NoError(t, os.Remove(AnchorPath(path)))
		}, "there was no anchor; the log ended at seq 5"},
		{"last 2 lines cut", func(t *testing.T, path string) {
			ls := readLines(t, path)
			require.NoError(t, os.WriteFile(path, append(bytes.Join(ls[:3], []byte("\n")), '\n'), 0o640))
		}, "the anchor named seq 5, the log ended at seq 3 (seq 4-5 missing)"},
		{"last line edited", func(t *testing.T, path string) {
			b, err := os.ReadFile(path)
			require.NoError(t, err)
			i := bytes.LastIndex(b, []byte(`"bot"`))
			b[i+3] = 'u'
			require.NoError(t, os.WriteFile(path, b, 0o640))
		}, "the log's line at the anchor's seq 5 was not the line anchored"},
		{"the anchor overwritten", func(t *testing.T, path string) {
			require.NoError(t, os.WriteFile(AnchorPath(path), []byte("{}"), 0o640))
		}, "the anchor was not usable (malformed audit anchor: schema \"\", want \"" + anchorSchema + "\"); the log ended at seq 5"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := logPath(t)
			writeLog(t, path, 5)
			tt.damage(t, path)

			l := openLog(t, path, Options{})
			require.NoError(t, l.Close())

			r := lastResult(check(t, CheckOptions{}, path))
			require.NoError(t, r.Err, "the writer re-anchored the chain")
			require.NotNil(t, r.Anchor)
			require.Len(t, r.Mismatches, 1, "and recorded what it found")
			assert.Equal(t, tt.want, r.Mismatches[0].Data.String())
			assert.Equal(t, r.Report.Lines, r.Mismatches[0].Line)
		})
	}
}

func TestCheckAnchoredLineEditedWithLinesAfterIt(t *testing.T) {
	path := logPath(t)
	writeLog(t, path, 5)
	killedWriter(t, path) // seq 6 past the anchor
	ls := readLines(t, path)
	edited := tamper(ls, func(ls [][]byte) [][]byte {
		ls[5] = bytes.Replace(ls[5], []byte(`"bot"`), []byte(`"bou"`), 1)
		return rechain(ls)
	})
	require.NoError(t, os.WriteFile(path, edited, 0o640))

	r := lastResult(check(t, CheckOptions{}, path))

	assert.Equal(t, &AnchorError{Kind: errLineEdited, Line: 5,
		Reason: "edited: seq 5 is not the line anchored (its sha256 differs from the anchor's); seq 6 follow it"}, r.Err)
}
