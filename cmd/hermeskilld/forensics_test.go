// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/audit"
	"github.com/hermeskill/hermeskilld/internal/calibrate"
	"github.com/hermeskill/hermeskilld/internal/certs"
	"github.com/hermeskill/hermeskilld/internal/supervisor"
)

// forensics runs hermeskilld in-process (cobra, not a child process: these
// commands only read and write files) and returns the exit status run()
// would give, with stdout and stderr.
func forensics(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	root := newRoot(&out, &errb)
	// Until root.go adds them (and without adding them twice after).
	for name, sub := range map[string]func() *cobra.Command{"audit": newAudit, "keygen": newKeygen, "calibrate": newCalibrate} {
		if c, _, err := root.Find([]string{name}); err != nil || c == root {
			root.AddCommand(sub())
		}
	}
	root.SetArgs(args)
	err := root.Execute()
	code = 0
	var ee *exitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.code
		if ee.err != nil {
			errb.WriteString("hermeskilld: " + ee.err.Error() + "\n")
		}
	default:
		code = exitUsage
		errb.WriteString("hermeskilld: " + err.Error() + "\n")
	}
	t.Logf("hermeskilld %s -> %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, out.String(), errb.String())
	return code, out.String(), errb.String()
}

// auditLog writes an audit log of n lines with internal/audit and returns
// its path and its lines (without "\n").
func auditLog(t *testing.T, n int) (string, [][]byte) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	l, err := audit.Open(path, audit.Options{})
	require.NoError(t, err)
	for i := range n {
		require.NoError(t, l.Append(audit.Event{Type: supervisor.EventSymptom, AgentID: "bot",
			Data: map[string]any{"check": "memory", "observed": i}}))
	}
	require.NoError(t, l.Close())
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	return path, bytes.Split(bytes.TrimSuffix(data, []byte("\n")), []byte("\n"))
}

func writeLines(t *testing.T, path string, ls [][]byte, tail string) {
	t.Helper()
	data := append(bytes.Join(ls, []byte("\n")), '\n')
	require.NoError(t, os.WriteFile(path, append(data, tail...), 0o640))
}

// copyAnchor puts the anchor of the log at from beside the log at to.
func copyAnchor(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(audit.AnchorPath(from))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(audit.AnchorPath(to), data, 0o640))
}

func TestAuditVerify(t *testing.T) {
	path, ls := auditLog(t, 6)
	code, out, _ := forensics(t, "audit", "verify", path)
	assert.Equal(t, 0, code)
	assert.Equal(t, path+": 6 lines, chain intact, anchored at seq 6\n", out)

	clone := func() [][]byte {
		c := make([][]byte, len(ls))
		for i := range ls {
			c[i] = bytes.Clone(ls[i])
		}
		return c
	}
	tests := []struct {
		name string
		edit func(ls [][]byte) [][]byte
		want string // stdout after "FILE: "
	}{
		{"one byte of a middle line", func(ls [][]byte) [][]byte {
			ls[2] = bytes.Replace(ls[2], []byte(`"memory"`), []byte(`"memorx"`), 1)
			return ls
		}, "line 4: edited or reordered: prev_sha256 does not match line 3"},
		{"one byte of a middle line, JSON broken (a sed edit of one byte)", func(ls [][]byte) [][]byte {
			ls[1] = bytes.Replace(ls[1], []byte(`"`), []byte(`'`), 1)
			return ls
		}, "line 2: not JSON"},
		{"a middle line deleted", func(ls [][]byte) [][]byte {
			return append(ls[:2], ls[3:]...)
		}, "line 3: deleted line(s): seq jumps from 2 to 4"},
		{"two lines swapped", func(ls [][]byte) [][]byte {
			ls[2], ls[3] = ls[3], ls[2]
			return ls
		}, "line 3: reordered: lines 3 and 4 swapped (seq 4 before seq 3)"},
		// What the chain alone cannot see, the anchor names.
		{"last 2 lines dropped", func(ls [][]byte) [][]byte {
			return ls[:4]
		}, "tail cut: seq 5-6 missing (the anchor ends at seq 6, the file at seq 4)"},
		{"last line edited", func(ls [][]byte) [][]byte {
			ls[5] = bytes.Replace(ls[5], []byte(`"memory"`), []byte(`"memorx"`), 1)
			return ls
		}, "line 6: edited: seq 6 is not the line anchored (its sha256 differs from the anchor's)"},
		{"first line deleted", func(ls [][]byte) [][]byte {
			return ls[1:]
		}, "first line missing: seq 1 (the anchor says the file starts at seq 1, it starts at seq 2)"},
		{"a line appended by hand", func(ls [][]byte) [][]byte {
			sum := sha256.Sum256(ls[5])
			return append(ls, []byte(`{"seq":7,"time":"2026-12-02T10:15:03Z","type":"operator_request","data":{"uid":0},"prev_sha256":"`+hex.EncodeToString(sum[:])+`"}`))
		}, "line 7: lines past the anchor: seq 7 (the anchor ends at seq 6)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bad := filepath.Join(t.TempDir(), "audit.jsonl")
			writeLines(t, bad, tt.edit(clone()), "")
			copyAnchor(t, path, bad)
			code, out, _ := forensics(t, "audit", "verify", bad)
			assert.Equal(t, exitFailure, code)
			assert.Equal(t, bad+": "+tt.want+"\n", out)
		})
	}

	t.Run("a torn last line, as a writer killed inside write(2) leaves", func(t *testing.T) {
		torn := filepath.Join(t.TempDir(), "audit.jsonl")
		last := ls[len(ls)-1]
		writeLines(t, torn, ls, string(last[:len(last)/2]))
		copyAnchor(t, path, torn)
		code, out, errs := forensics(t, "audit", "verify", torn)
		assert.Equal(t, 0, code)
		assert.Equal(t, torn+": 6 lines, chain intact, anchored at seq 6\n", out)
		assert.Contains(t, errs, torn+": last line torn ("+strconv.Itoa(len(last)/2)+" bytes), ignored")
	})

	t.Run("no anchor", func(t *testing.T) {
		bare := filepath.Join(t.TempDir(), "audit.jsonl")
		writeLines(t, bare, ls, "")
		code, out, _ := forensics(t, "audit", "verify", bare)
		assert.Equal(t, exitFailure, code)
		assert.Equal(t, bare+": no audit anchor: open "+bare+".anchor: no such file or directory"+
			" (--anchor PATH if it is kept elsewhere, --no-anchor to check the chain alone)\n", out)

		code, out, _ = forensics(t, "audit", "verify", "--no-anchor", bare)
		assert.Equal(t, 0, code)
		assert.Equal(t, bare+": 6 lines, chain intact\n", out)

		code, out, _ = forensics(t, "audit", "verify", "--anchor", audit.AnchorPath(path), bare)
		assert.Equal(t, 0, code, "an anchor kept elsewhere")
		assert.Equal(t, bare+": 6 lines, chain intact, anchored at seq 6\n", out)
	})
}

// A writer killed between its line and its anchor: verify names the line past the anchor;
// the next writer records it, and verify fails on the record until it is accepted.
func TestAuditVerifyCrashBetweenLineAndAnchor(t *testing.T) {
	path, _ := auditLog(t, 5)
	before, err := os.ReadFile(audit.AnchorPath(path))
	require.NoError(t, err)
	l, err := audit.Open(path, audit.Options{})
	require.NoError(t, err)
	require.NoError(t, l.Append(audit.Event{Type: supervisor.EventStep, AgentID: "bot"}))
	require.NoError(t, l.Close())
	require.NoError(t, os.WriteFile(audit.AnchorPath(path), before, 0o640)) // the update it never made

	code, out, _ := forensics(t, "audit", "verify", path)
	assert.Equal(t, exitFailure, code)
	assert.Equal(t, path+": line 6: lines past the anchor: seq 6 (the anchor ends at seq 5)\n", out)

	l, err = audit.Open(path, audit.Options{})
	require.NoError(t, err)
	require.NoError(t, l.Close())

	code, out, _ = forensics(t, "audit", "verify", path)
	assert.Equal(t, exitFailure, code)
	assert.Equal(t, path+": line 7: anchor mismatch recorded: seq 6 had been written past the anchor (seq 5); once explained, pass --accept 7\n"+
		path+": 7 lines, chain intact, anchored at seq 7; 1 anchor mismatch(es) recorded\n", out)

	code, out, errs := forensics(t, "audit", "verify", "--accept", "7", path)
	assert.Equal(t, 0, code)
	assert.Equal(t, path+": 7 lines, chain intact, anchored at seq 7\n", out)
	assert.Contains(t, errs, path+": line 7: anchor mismatch recorded (seq 7), accepted: seq 6 had been written past the anchor (seq 5)")
}

func TestAuditVerifySignedAnchor(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "signing.key")
	require.Equal(t, 0, first(forensics(t, "keygen", key)))
	otherKey := filepath.Join(dir, "other.key")
	require.Equal(t, 0, first(forensics(t, "keygen", otherKey)))
	signer, err := certs.LoadSigner(key)
	require.NoError(t, err)
	path := filepath.Join(dir, "audit.jsonl")
	l, err := audit.Open(path, audit.Options{Signer: signer})
	require.NoError(t, err)
	for range 3 {
		require.NoError(t, l.Append(audit.Event{Type: supervisor.EventSymptom, AgentID: "bot"}))
	}
	require.NoError(t, l.Close())

	code, out, errs := forensics(t, "audit", "verify", path)
	assert.Equal(t, 0, code)
	assert.Contains(t, errs, "the anchor is signed by "+signer.KeyID()+"; --pubkey checks it")

	code, out, _ = forensics(t, "audit", "verify", "--pubkey", key+".pub", path)
	assert.Equal(t, 0, code)
	assert.Equal(t, path+": 3 lines, chain intact, anchored at seq 3, signed by "+signer.KeyID()+"\n", out)

	code, out, _ = forensics(t, "audit", "verify", "--pubkey", otherKey+".pub", path)
	assert.Equal(t, exitFailure, code)
	assert.Equal(t, path+": "+path+".anchor: audit anchor signature does not verify (the anchor names key "+signer.KeyID()+")\n", out)

	// The anchor moved back one line, as someone cutting the last line would: the signature
	// no longer holds.
	anchor, err := os.ReadFile(audit.AnchorPath(path))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(audit.AnchorPath(path), bytes.Replace(anchor, []byte(`"seq":3`), []byte(`"seq":2`), 1), 0o640))
	code, out, _ = forensics(t, "audit", "verify", "--pubkey", key+".pub", path)
	assert.Equal(t, exitFailure, code)
	assert.Contains(t, out, "audit anchor signature does not verify")

	unsigned, _ := auditLog(t, 2)
	code, out, _ = forensics(t, "audit", "verify", "--pubkey", key+".pub", unsigned)
	assert.Equal(t, exitFailure, code)
	assert.Equal(t, unsigned+": "+unsigned+".anchor: audit anchor is not signed\n", out)

	code, _, _ = forensics(t, "audit", "verify", "--no-anchor", "--pubkey", key+".pub", path)
	assert.Equal(t, exitUsage, code)
}

// first returns the exit status of a forensics call.
func first(code int, _, _ string) int { return code }

func TestAuditVerifyRotatedChain(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	l, err := audit.Open(path, audit.Options{MaxBytes: 600, Keep: 5})
	require.NoError(t, err)
	for i := range 12 {
		require.NoError(t, l.Append(audit.Event{Type: supervisor.EventStep, AgentID: "bot", Data: map[string]int{"i": i}}))
	}
	require.NoError(t, l.Close())
	files, err := filepath.Glob(path + ".*")
	require.NoError(t, err)
	var chain []string // oldest first
	for n := len(files); n >= 1; n-- {
		if _, err := os.Stat(path + "." + strconv.Itoa(n)); err == nil {
			chain = append(chain, path+"."+strconv.Itoa(n))
		}
	}
	require.GreaterOrEqual(t, len(chain), 2, "the log rotated: %v", files)
	chain = append(chain, path)

	code, out, _ := forensics(t, append([]string{"audit", "verify"}, chain...)...)
	assert.Equal(t, 0, code)
	assert.Equal(t, len(chain), strings.Count(out, "chain intact"))
	assert.Equal(t, 1, strings.Count(out, ", anchored at seq "), "the last file, against its anchor")

	// The newest file on its own starts mid-chain: intact, with a note; its anchor says
	// where it starts.
	code, _, errs := forensics(t, "audit", "verify", path)
	assert.Equal(t, 0, code)
	assert.Contains(t, errs, "begins mid-chain")

	// A rotated file left out: the next one does not link.
	gap := append([]string{"audit", "verify", chain[0]}, chain[2:]...)
	code, out, _ = forensics(t, gap...)
	assert.Equal(t, exitFailure, code)
	assert.Contains(t, out, chain[2]+": line 1: ")
	assert.Contains(t, out, "deleted line(s)")

	// Newest first: wrong order.
	code, _, _ = forensics(t, "audit", "verify", path, chain[0])
	assert.Equal(t, exitFailure, code)
}

func TestAuditVerifyErrors(t *testing.T) {
	code, _, errs := forensics(t, "audit", "verify", filepath.Join(t.TempDir(), "missing.jsonl"))
	assert.Equal(t, exitFailure, code)
	assert.Contains(t, errs, "no such file")
	code, _, _ = forensics(t, "audit", "verify")
	assert.Equal(t, exitUsage, code)
}

func TestKeygen(t *testing.T) {
	key := filepath.Join(t.TempDir(), "signing.key")
	code, out, _ := forensics(t, "keygen", key)
	require.Equal(t, 0, code)
	signer, err := certs.LoadSigner(key)
	require.NoError(t, err)
	assert.Equal(t, "public key: "+key+".pub\nkey id: "+signer.KeyID()+"\n", out)
	fi, err := os.Stat(key)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())

	code, _, errs := forensics(t, "keygen", key)
	assert.Equal(t, exitFailure, code, "never replaces a key")
	assert.Contains(t, errs, "never replaces a key")
	code, _, _ = forensics(t, "keygen")
	assert.Equal(t, exitUsage, code)
}

func TestCalibrate(t *testing.T) {
	dir := t.TempDir()
	now := time.Now().UTC()
	write := func(id, check, mode string, ago time.Duration) {
		c := &certs.Certificate{CertID: id, AgentID: "bot", Mode: mode, TriggerType: certs.TriggerAuto,
			TriggerCheck: check, TriggeredAt: now.Add(-ago), Escalation: certs.Escalation{Reached: certs.ReachedSigterm}}
		if mode == certs.ModeEnforce {
			c.TerminatedAt = c.TriggeredAt.Add(10 * time.Second)
		}
		_, err := certs.Write(dir, c, nil)
		require.NoError(t, err)
	}
	write("c1", "tool_loop", certs.ModeEnforce, time.Hour)
	write("c2", "tool_loop", certs.ModeEnforce, 2*time.Hour)
	write("c3", "tool_loop", certs.ModeShadow, 3*time.Hour)
	write("c4", "memory", certs.ModeEnforce, 48*time.Hour)
	for id, v := range map[string]string{"c1": calibrate.TruePositive, "c2": calibrate.FalsePositive, "c3": calibrate.TruePositive, "c4": calibrate.FalsePositive} {
		require.NoError(t, calibrate.AppendLabel(dir, calibrate.Label{CertID: id, Verdict: v, By: "uid:0(root)"}))
	}

	code, out, _ := forensics(t, "calibrate", "--dir", dir)
	require.Equal(t, 0, code)
	assert.Equal(t, ""+
		"CHECK      KILLS  SHADOW  LABELLED  TP  FP  PRECISION  MEDIAN TTD  REACHED\n"+
		"memory     1      0       1         0   1   0.0%       10s         sigterm 1\n"+
		"tool_loop  2      1       3         2   1   66.7%      10s         sigterm 2\n", out)

	code, out, _ = forensics(t, "calibrate", "--dir", dir, "--since", "24h", "--json")
	require.Equal(t, 0, code)
	var stats []calibrate.CheckStats
	require.NoError(t, json.Unmarshal([]byte(out), &stats))
	require.Len(t, stats, 1, "memory's kill is older than a day")
	assert.Equal(t, "tool_loop", stats[0].Check)
	assert.InDelta(t, 2.0/3.0, *stats[0].Precision, 1e-12)

	// An empty window; a planted file and a damaged label line are warned about.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "planted.json"), []byte("{}"), 0o640))
	f, err := os.OpenFile(filepath.Join(dir, calibrate.LabelsFile), os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	f.WriteString("{oops\n")
	f.Close()
	code, out, errs := forensics(t, "calibrate", "--dir", dir, "--since", "1ms")
	require.Equal(t, 0, code)
	assert.Contains(t, out, "no kills recorded in "+dir+" since ")
	assert.Contains(t, errs, "1 file(s) in "+dir+" skipped")
	assert.Contains(t, errs, "bad line")

	code, out, _ = forensics(t, "calibrate", "--dir", t.TempDir(), "--json")
	require.Equal(t, 0, code)
	assert.Equal(t, "[]\n", out)

	code, _, _ = forensics(t, "calibrate", "--dir", filepath.Join(dir, "missing"))
	assert.Equal(t, exitFailure, code)
	code, _, _ = forensics(t, "calibrate", "--since", "-1h")
	assert.Equal(t, exitUsage, code)
}

// A rollback — the log and its anchor put back as they were earlier —
// verifies on its own; a later witness (a certificate's audit_anchor, a
// directory of them, an anchor file kept elsewhere) finds it.
func TestAuditVerifyRollback(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	appendN := func(n int) {
		l, err := audit.Open(path, audit.Options{})
		require.NoError(t, err)
		for i := range n {
			require.NoError(t, l.Append(audit.Event{Type: supervisor.EventSymptom, AgentID: "bot", Data: map[string]any{"i": i}}))
		}
		require.NoError(t, l.Close())
	}
	appendN(3)
	oldLog, err := os.ReadFile(path)
	require.NoError(t, err)
	oldAnchor, err := os.ReadFile(audit.AnchorPath(path))
	require.NoError(t, err)
	appendN(3)
	later, err := audit.ReadAnchor(audit.AnchorPath(path))
	require.NoError(t, err)
	require.Equal(t, uint64(6), later.Seq)
	certs := t.TempDir()
	cert := filepath.Join(certs, "c1.json")
	require.NoError(t, os.WriteFile(cert, fmt.Appendf(nil, `{"cert_id":"c1","audit_anchor":{"seq":%d,"sha256":%q}}`, later.Seq, later.SHA256), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(certs, "noanchor.json"), []byte(`{"cert_id":"c0"}`), 0o644))
	kept := filepath.Join(t.TempDir(), "anchor.copy")
	require.NoError(t, os.WriteFile(kept, mustRead(t, audit.AnchorPath(path)), 0o644))

	code, out, _ := forensics(t, "audit", "verify", "--witness", cert, path)
	require.Equal(t, 0, code, out)
	require.Equal(t, path+": 6 lines, chain intact, anchored at seq 6\n", out, "the live log holds its witness")

	// The rollback.
	require.NoError(t, os.WriteFile(path, oldLog, 0o640))
	require.NoError(t, os.WriteFile(audit.AnchorPath(path), oldAnchor, 0o640))
	code, out, _ = forensics(t, "audit", "verify", path)
	require.Equal(t, 0, code, "without a witness a rollback cannot be seen: %s", out)
	for _, w := range []string{cert, certs, kept} {
		code, out, _ = forensics(t, "audit", "verify", "--witness", w, path)
		require.Equal(t, exitFailure, code, "--witness %s: %s", w, out)
		require.Contains(t, out, path+": rolled back: ")
		require.Contains(t, out, "saw seq 6 (sha256 "+later.SHA256[:12]+"…), the log ends at seq 3: seq 4-6 missing")
	}

	// A witness whose line the log holds otherwise: rewritten.
	bad := filepath.Join(t.TempDir(), "bad.json")
	require.NoError(t, os.WriteFile(bad, fmt.Appendf(nil, `{"audit_anchor":{"seq":2,"sha256":%q}}`, strings.Repeat("ab", 32)), 0o644))
	code, out, _ = forensics(t, "audit", "verify", "--witness", bad, path)
	require.Equal(t, exitFailure, code, out)
	require.Equal(t, path+": line 2: rewritten: seq 2 is not the line "+bad+" saw (its sha256 differs)\n", out)

	for _, w := range []string{filepath.Join(t.TempDir(), "none.json"), oldLogFile(t, oldLog)} {
		code, _, errs := forensics(t, "audit", "verify", "--witness", w, path)
		require.Equal(t, exitUsage, code, errs)
	}
}

// oldLogFile is a file that is no witness (an audit log, not JSON of one object).
func oldLogFile(t *testing.T, data []byte) string {
	p := filepath.Join(t.TempDir(), "log.jsonl")
	require.NoError(t, os.WriteFile(p, data, 0o644))
	return p
}
