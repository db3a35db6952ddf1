// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package audit

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// logPath is an audit log path whose directory does not exist yet.
func logPath(t *testing.T) string {
	return filepath.Join(t.TempDir(), "state", "audit.jsonl")
}

func openLog(t *testing.T, path string, opts Options) *Log {
	t.Helper()
	l, err := Open(path, opts)
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	return l
}

func appendN(t *testing.T, l *Log, writer string, n int) {
	t.Helper()
	for i := range n {
		require.NoError(t, l.Append(writerEvent(writer, i)))
	}
}

// writeLog writes a log of n events at path and returns its bytes.
func writeLog(t *testing.T, path string, n int) []byte {
	t.Helper()
	l := openLog(t, path, Options{})
	appendN(t, l, "bot", n)
	require.NoError(t, l.Close())
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return b
}

func verifyFile(t *testing.T, path string) Report {
	t.Helper()
	return verifyFileFrom(t, path, Report{})
}

func verifyFileFrom(t *testing.T, path string, prev Report) Report {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	rep, err := verifyFrom(f, prev)
	require.NoError(t, err, path)
	return rep
}

// lines splits a log into its lines, without their "\n".
func lines(b []byte) [][]byte {
	return bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n"))
}

func readLines(t *testing.T, path string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return lines(b)
}

// line is a decoded line, for assertions.
type line struct {
	Seq        uint64
	Time       string
	Type       string
	AgentID    string `json:"agent_id"`
	Data       json.RawMessage
	TornBytes  int64  `json:"torn_bytes"`
	PrevSHA256 string `json:"prev_sha256"`
}

func decode(t *testing.T, b []byte) line {
	t.Helper()
	var l line
	require.NoError(t, json.Unmarshal(b, &l), string(b))
	return l
}

// keys returns the keys of the JSON object b in the order they appear.
func keys(t *testing.T, b []byte) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	_, err := dec.Token() // {
	require.NoError(t, err)
	var ks []string
	for dec.More() {
		tok, err := dec.Token()
		require.NoError(t, err)
		ks = append(ks, tok.(string))
		var skip json.RawMessage
		require.NoError(t, dec.Decode(&skip))
	}
	return ks
}

func TestAppendThenVerify(t *testing.T) {
	path := logPath(t)
	ls := lines(writeLog(t, path, 10))

	rep := verifyFile(t, path)

	require.Equal(t, Report{
		Lines: 10, FirstSeq: 1, LastSeq: 10, FirstPrev: zeroHash, LastHash: hashLine(ls[9]),
	}, rep)
}

func TestLineFormat(t *testing.T) {
	path := logPath(t)
	l := openLog(t, path, Options{})
	before := time.Now()
	require.NoError(t, l.Append(Event{
		Type: TypeOperatorRequest, AgentID: "bot",
		Data: map[string]any{"uid": 1000, "path": "/v1/agents/bot/kill", "reason": "<why> & how"},
	}))
	require.NoError(t, l.Append(Event{Type: "agent_started"}))
	require.NoError(t, l.Close())

	ls := readLines(t, path)
	require.Len(t, ls, 2)
	first := regexp.MustCompile(`^\{"seq":1,"time":"([^"]+)","type":"operator_request","agent_id":"bot",` +
		`"data":\{"path":"/v1/agents/bot/kill","reason":"<why> & how","uid":1000\},"prev_sha256":"0{64}"\}$`)
	m := first.FindSubmatch(ls[0])
	require.NotNil(t, m, string(ls[0]))
	at, err := time.Parse(time.RFC3339Nano, string(m[1]))
	require.NoError(t, err)
	assert.Equal(t, time.UTC, at.Location())
	assert.False(t, at.Before(before.Truncate(time.Microsecond)))
	assert.Equal(t, []string{"seq", "time", "type", "prev_sha256"}, keys(t, ls[1]))
	assert.Equal(t, hashLine(ls[0]), decode(t, ls[1]).PrevSHA256)
}

func TestFileModes(t *testing.T) {
	path := logPath(t)
	openLog(t, path, Options{})

	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Zero(t, fi.Mode().Perm()&^0o640, "file mode %v", fi.Mode())
	di, err := os.Stat(filepath.Dir(path))
	require.NoError(t, err)
	assert.Zero(t, di.Mode().Perm()&^0o750, "dir mode %v", di.Mode())
}

// writeLogAnchors writes a log of n events at path and returns its bytes and, for each k of
// 0..n, the anchor file as it was after k lines (nil for 0).
func writeLogAnchors(t *testing.T, path string, n int) ([]byte, [][]byte) {
	t.Helper()
	l := openLog(t, path, Options{})
	anchors := [][]byte{nil}
	for i := range n {
		require.NoError(t, l.Append(writerEvent("bot", i)))
		a, err := os.ReadFile(AnchorPath(path))
		require.NoError(t, err)
		anchors = append(anchors, a)
	}
	require.NoError(t, l.Close())
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return b, anchors
}

// A writer killed inside write(2) leaves a torn tail after the line its anchor names: Open
// cuts it, and the log and its anchor agree again.
func TestTornTailIsCutAndRecorded(t *testing.T) {
	good, anchors := writeLogAnchors(t, logPath(t), 5)
	last := lines(good)[4]
	tests := []struct {
		name      string
		data      []byte
		torn      int // bytes Open cuts off
		goodLines int
	}{
		{"last line cut mid-write", good[:len(good)-20], len(last) + 1 - 20, 4},
		{"last line without its newline", good[:len(good)-1], len(last), 4},
		{"zeros after the last line", append(bytes.Clone(good), make([]byte, 100)...), 100, 5},
		{"complete last line not JSON", append(bytes.Clone(good), `{"seq":6,"ti`+"\n"...), 13, 5},
		{"not JSON then partial", append(bytes.Clone(good), "xx\n{\"se"...), 7, 5},
		{"only a partial line", []byte(`{"seq":1,"time":"2`), 18, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "audit.jsonl")
			require.NoError(t, os.WriteFile(path, tt.data, 0o640))
			if a := anchors[tt.goodLines]; a != nil {
				require.NoError(t, os.WriteFile(AnchorPath(path), a, 0o640))
			}

			rep, err := verify(bytes.NewReader(tt.data))
			require.NoError(t, err)
			assert.True(t, rep.TornTail)
			assert.EqualValues(t, tt.torn, rep.TornBytes)
			assert.Equal(t, tt.goodLines, rep.Lines)

			l := openLog(t, path, Options{})
			require.NoError(t, l.Append(Event{Type: "agent_started", AgentID: "bot"}))
			require.NoError(t, l.Close())

			rep = verifyFile(t, path)
			assert.False(t, rep.TornTail)
			assert.Equal(t, tt.goodLines+1, rep.Lines)
			after, err := os.ReadFile(path)
			require.NoError(t, err)
			kept := tt.data[:len(tt.data)-tt.torn]
			require.True(t, bytes.HasPrefix(after, kept), "lines before the torn tail are untouched")
			appended := decode(t, after[len(kept):])
			assert.EqualValues(t, tt.torn, appended.TornBytes)
			assert.EqualValues(t, tt.goodLines+1, appended.Seq)
			assert.Equal(t, "agent_started", appended.Type, "no anchor mismatch")
			checkOK(t, path)
		})
	}
}

func TestTornTailLeftByAnotherWriter(t *testing.T) {
	path := logPath(t)
	l := openLog(t, path, Options{})
	appendN(t, l, "bot", 3)
	// A second writer dies inside write(2).
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = f.WriteString(`{"seq":4,"time":"2`)
	require.NoError(t, err)
	require.NoError(t, f.Close())

	require.NoError(t, l.Append(writerEvent("bot", 3)))

	rep := verifyFile(t, path)
	assert.Equal(t, 4, rep.Lines)
	assert.False(t, rep.TornTail)
	assert.EqualValues(t, 18, decode(t, readLines(t, path)[3]).TornBytes)
}

func TestOpenRefusesACorruptTail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	good := writeLog(t, path, 5)
	bad := append(bytes.Clone(good), "not a record\nnor this\n"...)
	require.NoError(t, os.WriteFile(path, bad, 0o640))

	_, err := Open(path, Options{})

	require.ErrorIs(t, err, errCorruptTail)
	after, rerr := os.ReadFile(path)
	require.NoError(t, rerr)
	assert.Equal(t, bad, after, "nothing is cut off")
}

func TestAppendErrors(t *testing.T) {
	path := logPath(t)
	l := openLog(t, path, Options{})

	require.ErrorIs(t, l.Append(Event{}), errNoType)
	var unsupported *json.UnsupportedTypeError
	require.ErrorAs(t, l.Append(Event{Type: "symptom", Data: make(chan int)}), &unsupported)
	require.NoError(t, l.Append(Event{Type: "symptom"}))
	require.NoError(t, l.Close())
	require.ErrorIs(t, l.Append(Event{Type: "symptom"}), errClosed)
	require.NoError(t, l.Close(), "a second Close")

	assert.Equal(t, 1, verifyFile(t, path).Lines)
}

func TestRotationKeepsTheChain(t *testing.T) {
	path := logPath(t)
	const maxBytes = 1000
	l := openLog(t, path, Options{MaxBytes: maxBytes, Keep: 3})
	appendN(t, l, "bot", 60) // about 6 lines a file: some 10 rotations
	require.NoError(t, l.Close())

	require.NoFileExists(t, path+".4")
	var rep Report
	for _, name := range []string{path + ".3", path + ".2", path + ".1", path} {
		fi, err := os.Stat(name)
		require.NoError(t, err)
		assert.LessOrEqual(t, fi.Size(), int64(maxBytes))
		first := decode(t, readLines(t, name)[0])
		assert.Equal(t, typeRotated, first.Type, name)
		assert.JSONEq(t, `{"previous_file":"audit.jsonl.1"}`, string(first.Data))
		if rep.Lines > 0 {
			assert.Equal(t, rep.LastHash, first.PrevSHA256)
		}
		rep = verifyFileFrom(t, name, rep)
	}
	lastLines := readLines(t, path)
	assert.JSONEq(t, `{"i":59}`, string(decode(t, lastLines[len(lastLines)-1]).Data))

	// A missing file in the middle is a broken link.
	oldest := verifyFile(t, path+".3")
	f, err := os.Open(path + ".1")
	require.NoError(t, err)
	defer f.Close()
	_, err = verifyFrom(f, oldest)
	var broken *BrokenError
	require.ErrorAs(t, err, &broken)
	assert.Equal(t, 1, broken.Line)
	assert.Regexp(t, `^deleted line\(s\): seq jumps from \d+ to \d+$`, broken.Reason)
}

func TestRotationCrashBeforeTheNewFile(t *testing.T) {
	path := logPath(t)
	writeLog(t, path, 5)
	// rotate renamed the file and died before creating the new one.
	require.NoError(t, os.Rename(path, path+".1"))

	l := openLog(t, path, Options{MaxBytes: 1 << 20, Keep: 2})
	require.NoError(t, l.Append(writerEvent("bot", 5)))
	require.NoError(t, l.Close())

	rep := verifyFileFrom(t, path, verifyFile(t, path+".1"))
	assert.Equal(t, uint64(6), rep.FirstSeq)
}

func TestWriteIsOneLineAtATime(t *testing.T) {
	// Data with newlines, quotes and a raw message cannot split a line.
	path := logPath(t)
	l := openLog(t, path, Options{})
	require.NoError(t, l.Append(Event{Type: "symptom", Data: map[string]any{
		"message": "line one\nline two \"quoted\"\r\n",
		"raw":     json.RawMessage("{\n  \"a\": 1\n}"),
	}}))
	require.NoError(t, l.Close())

	b, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, 1, bytes.Count(b, []byte("\n")))
	rep, err := verify(bytes.NewReader(b))
	require.NoError(t, err)
	assert.Equal(t, 1, rep.Lines)
}

func TestShortWriteIsCutBack(t *testing.T) {
	path := logPath(t)
	before := writeLog(t, path, 3)
	cmd := exec.Command(os.Args[0], path, strconv.Itoa(len(before)+100))
	cmd.Env = append(os.Environ(), helperEnv+"=short-write")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "helper: %s", out)

	after, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, before, after, "the 100 bytes that fitted are gone")
}

func TestLinesLongerThanTheTailChunk(t *testing.T) {
	path := logPath(t)
	l := openLog(t, path, Options{})
	for i := range 3 {
		require.NoError(t, l.Append(Event{Type: "symptom", Data: strings.Repeat(strconv.Itoa(i), 9000)}))
	}
	require.NoError(t, l.Close())
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = f.WriteString(`{"seq":4,"data":"` + strings.Repeat("y", 6000))
	require.NoError(t, err)
	require.NoError(t, f.Close())

	l = openLog(t, path, Options{})
	require.NoError(t, l.Append(Event{Type: "symptom"}))
	require.NoError(t, l.Close())

	rep := verifyFile(t, path)
	assert.Equal(t, 4, rep.Lines)
	assert.EqualValues(t, 6017, decode(t, readLines(t, path)[3]).TornBytes)
}
