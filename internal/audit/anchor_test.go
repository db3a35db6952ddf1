// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package audit

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/hermeskill/hermeskilld/internal/certs"
)

var _ Signer = (*certs.Signer)(nil)

// testSigner is a deterministic key, as the certificates' tests use.
func testSigner(t *testing.T, seed string) *certs.Signer {
	t.Helper()
	s, err := certs.NewSigner(ed25519.NewKeyFromSeed([]byte(strings.Repeat(seed, 32)[:32])))
	require.NoError(t, err)
	return s
}

func TestAnchorFollowsEveryAppend(t *testing.T) {
	path := logPath(t)
	l := openLog(t, path, Options{})
	_, ok := l.Head()
	assert.False(t, ok, "no line, no head")

	for i := range 5 {
		require.NoError(t, l.Append(writerEvent("bot", i)))

		ls := readLines(t, path)
		want := Head{Seq: uint64(i + 1), SHA256: hashLine(ls[i])}
		a, err := ReadAnchor(AnchorPath(path))
		require.NoError(t, err)
		assert.Equal(t, Anchor{Head: want, FirstSeq: 1, FirstPrev: zeroHash}, a)
		h, ok := l.Head()
		require.True(t, ok)
		assert.Equal(t, want, h)
	}
}

func TestAnchorFileFormat(t *testing.T) {
	path := logPath(t)
	writeLog(t, path, 3)

	b, err := os.ReadFile(AnchorPath(path))
	require.NoError(t, err)
	assert.Len(t, b, anchorSize, "always the same length, so a pwrite never leaves old bytes")
	assert.True(t, bytes.HasSuffix(b, []byte(" \n")))
	obj := bytes.TrimRight(b, " \n")
	assert.Equal(t, []string{"schema", "seq", "sha256", "first_seq", "first_prev_sha256"}, keys(t, obj))
	fi, err := os.Stat(AnchorPath(path))
	require.NoError(t, err)
	assert.Zero(t, fi.Mode().Perm()&^0o640, "file mode %v", fi.Mode())
}

func TestHeadDoesNotWaitForTheDisk(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	l, err := Open(path, Options{})
	require.NoError(t, err)
	a := NewAsync(l, 16, nil)
	require.True(t, a.Append(Event{Type: "agent_started"}))
	require.NoError(t, a.Close())
	l, err = Open(path, Options{})
	require.NoError(t, err)
	want, ok := l.Head()
	require.True(t, ok, "Open publishes the head it found")
	assert.EqualValues(t, 1, want.Seq)

	// Another holder of the chain's lock blocks the writer goroutine inside Append.
	other, err := os.Open(path + ".lock")
	require.NoError(t, err)
	defer other.Close()
	require.NoError(t, flock(other, unix.LOCK_EX))
	a = NewAsync(l, 16, nil)
	require.True(t, a.Append(Event{Type: "symptom"}))

	got, ok := a.Head()

	require.True(t, ok)
	assert.Equal(t, want, got, "the last line written, while the next waits")
	require.NoError(t, flock(other, unix.LOCK_UN))
	require.NoError(t, a.Close())
	got, ok = a.Head()
	require.True(t, ok)
	assert.EqualValues(t, 2, got.Seq)
}

func TestRotationCarriesTheAnchor(t *testing.T) {
	path := logPath(t)
	l := openLog(t, path, Options{MaxBytes: 1000, Keep: 3})
	appendN(t, l, "bot", 60)
	require.NoError(t, l.Close())
	files := []string{path + ".3", path + ".2", path + ".1", path}

	res := checkOK(t, files...)

	cur := readLines(t, path)
	first := decode(t, cur[0])
	require.Equal(t, typeRotated, first.Type)
	a := lastResult(res).Anchor
	assert.Equal(t, first.Seq, a.FirstSeq, "the anchor follows the rotation")
	assert.Equal(t, first.PrevSHA256, a.FirstPrev)
	assert.Equal(t, hashLine(cur[len(cur)-1]), a.SHA256)
	checkOK(t, path) // the newest file on its own: its first line is where the anchor says

	t.Run("the previous file's tail cut", func(t *testing.T) {
		dir := t.TempDir()
		old, cur := filepath.Join(dir, "audit.jsonl.1"), filepath.Join(dir, "audit.jsonl")
		ls := readLines(t, path+".1")
		require.NoError(t, os.WriteFile(old, append(bytes.Join(ls[:len(ls)-1], []byte("\n")), '\n'), 0o640))
		copyFile(t, path, cur)
		copyFile(t, AnchorPath(path), AnchorPath(cur))

		r := lastResult(check(t, CheckOptions{}, old, cur))

		var broken *BrokenError
		require.ErrorAs(t, r.Err, &broken, "FILE's first line links to FILE.1's last")
		assert.Equal(t, cur, r.Path)
	})
	t.Run("a rotated file glued back in front", func(t *testing.T) {
		glued := filepath.Join(t.TempDir(), "audit.jsonl")
		require.NoError(t, os.WriteFile(glued, append(readFile(t, path+".1"), readFile(t, path)...), 0o640))
		copyFile(t, AnchorPath(path), AnchorPath(glued))

		r := lastResult(check(t, CheckOptions{}, glued))

		require.ErrorIs(t, r.Err, errFirstChanged)
	})
	t.Run("a writer killed between the rotated line and its anchor", func(t *testing.T) {
		dir := t.TempDir()
		cur := filepath.Join(dir, "audit.jsonl")
		ls := readLines(t, path+".1")
		require.NoError(t, os.WriteFile(cur+".1", append(bytes.Join(ls, []byte("\n")), '\n'), 0o640))
		require.NoError(t, os.WriteFile(cur, append(bytes.Clone(readLines(t, path)[0]), '\n'), 0o640))
		// The anchor of FILE.1 before the rotation.
		l1 := decode(t, ls[0])
		writeAnchorFile(t, AnchorPath(cur), Anchor{
			Head: Head{Seq: decode(t, ls[len(ls)-1]).Seq, SHA256: hashLine(ls[len(ls)-1])}, FirstSeq: l1.Seq, FirstPrev: l1.PrevSHA256,
		})

		r := lastResult(check(t, CheckOptions{}, cur+".1", cur))
		require.ErrorIs(t, r.Err, errPastAnchor)

		l := openLog(t, cur, Options{MaxBytes: 1000, Keep: 3})
		require.NoError(t, l.Close())
		r = lastResult(check(t, CheckOptions{}, cur+".1", cur))
		require.NoError(t, r.Err)
		require.Len(t, r.Mismatches, 1)
		assert.Equal(t, causeLinesPastAnchor, r.Mismatches[0].Data.Cause)
	})
}

func TestRotationCrashBeforeTheNewFileKeepsTheAnchor(t *testing.T) {
	path := logPath(t)
	writeLog(t, path, 5)
	require.NoError(t, os.Rename(path, path+".1")) // rotate died before the new file

	l := openLog(t, path, Options{MaxBytes: 1 << 20, Keep: 2})
	require.NoError(t, l.Append(writerEvent("bot", 5)))
	require.NoError(t, l.Close())

	res := checkOK(t, path+".1", path)
	assert.EqualValues(t, 6, lastResult(res).Anchor.FirstSeq)
}

func writeAnchorFile(t *testing.T, path string, a Anchor) {
	t.Helper()
	b, err := encodeAnchor(a)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, b, 0o640))
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return b
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	require.NoError(t, os.WriteFile(to, readFile(t, from), 0o640))
}

func TestSignedAnchor(t *testing.T) {
	key, other := testSigner(t, "k"), testSigner(t, "o")
	path := logPath(t)
	l := openLog(t, path, Options{Signer: key})
	appendN(t, l, "bot", 5)
	require.NoError(t, l.Close())
	raw := readFile(t, AnchorPath(path))

	t.Run("valid", func(t *testing.T) {
		r := lastResult(check(t, CheckOptions{PublicKey: key.Public()}, path))
		require.NoError(t, r.Err)
		require.NotNil(t, r.Anchor.Signature)
		assert.Equal(t, key.KeyID(), r.Anchor.Signature.KeyID)
		// The signature is over the anchor's canonical JSON, as a certificate's is.
		require.NoError(t, certs.Verify(raw, key.Public()))
	})
	t.Run("wrong key", func(t *testing.T) {
		r := lastResult(check(t, CheckOptions{PublicKey: other.Public()}, path))
		require.ErrorIs(t, r.Err, ErrAnchorSignature)
		assert.Contains(t, r.Err.Error(), "the anchor names key "+key.KeyID())
	})
	t.Run("log and anchor rewritten alike, without the key", func(t *testing.T) {
		// Cut the last line and move the anchor back to the line before it: what the
		// hash chain and an unsigned anchor cannot tell from the truth.
		dir := t.TempDir()
		cut := filepath.Join(dir, "audit.jsonl")
		ls := readLines(t, path)
		require.NoError(t, os.WriteFile(cut, append(bytes.Join(ls[:4], []byte("\n")), '\n'), 0o640))
		a, err := ReadAnchor(AnchorPath(path))
		require.NoError(t, err)
		a.Head = Head{Seq: 4, SHA256: hashLine(ls[3])}
		writeAnchorFile(t, AnchorPath(cut), a)

		r := lastResult(check(t, CheckOptions{}, cut))
		require.NoError(t, r.Err, "without the public key, the forgery holds")

		r = lastResult(check(t, CheckOptions{PublicKey: key.Public()}, cut))
		require.ErrorIs(t, r.Err, ErrAnchorSignature, "with it, it does not")
	})
	t.Run("every byte of the signed values", func(t *testing.T) {
		obj := bytes.TrimRight(raw, " \n")
		sig := bytes.Index(obj, []byte(`,"signature"`))
		for i := range sig {
			c := obj[i]
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
				continue
			}
			mut := bytes.Clone(raw)
			mut[i] = "1234567890abcdef0"[strings.IndexByte("0123456789abcdef", c)+1]
			a, err := decodeAnchor(mut)
			if err != nil {
				continue // no longer an anchor at all: Check says so
			}
			require.ErrorIs(t, a.VerifySignature(key.Public()), ErrAnchorSignature, "byte %d", i)
		}
	})
	t.Run("unsigned", func(t *testing.T) {
		plain := logPath(t)
		writeLog(t, plain, 2)
		r := lastResult(check(t, CheckOptions{PublicKey: key.Public()}, plain))
		require.ErrorIs(t, r.Err, ErrAnchorUnsigned)
	})
	t.Run("a writer with the key finds an anchor it does not verify", func(t *testing.T) {
		plain := logPath(t)
		writeLog(t, plain, 2) // unsigned: signing was just turned on

		l := openLog(t, plain, Options{Signer: key})
		require.NoError(t, l.Close())

		r := lastResult(check(t, CheckOptions{PublicKey: key.Public()}, plain))
		require.NoError(t, r.Err, "re-anchored and signed")
		require.Len(t, r.Mismatches, 1)
		m := r.Mismatches[0].Data
		assert.Equal(t, causeBadAnchor, m.Cause)
		assert.Equal(t, ErrAnchorUnsigned.Error(), m.Error)
		require.NotNil(t, m.Anchor, "what it found is in the record")
		assert.EqualValues(t, 2, m.Anchor.Seq)
	})
}

func TestMismatchDataIsInTheLine(t *testing.T) {
	path := logPath(t)
	writeLog(t, path, 2)
	require.NoError(t, os.Remove(AnchorPath(path)))
	l := openLog(t, path, Options{})
	require.NoError(t, l.Close())

	ls := readLines(t, path)
	rec := decode(t, ls[2])
	var m MismatchData
	require.NoError(t, json.Unmarshal(rec.Data, &m))
	assert.Equal(t, MismatchData{Cause: causeNoAnchor, Log: Head{Seq: 2, SHA256: hashLine(ls[1])}}, m)
	assert.Zero(t, rec.TornBytes)
}

// encodeAnchor writes by hand what encoding/json would, and decodeAnchor reads it back.
func TestEncodeAnchorIsJSONMarshal(t *testing.T) {
	h := Head{Seq: 18446744073709551615, SHA256: hashLine([]byte("x"))}
	for _, a := range []Anchor{
		{Head: Head{Seq: 1, SHA256: zeroHash}, FirstSeq: 1, FirstPrev: zeroHash},
		{Head: h, FirstSeq: 0, FirstPrev: zeroHash},
		{Head: h, FirstSeq: 7, FirstPrev: h.SHA256, Signature: &AnchorSignature{Alg: "ed25519", KeyID: "ed25519:0123456789abcdef", Value: "c2ln"}},
		{Head: h, FirstSeq: 7, FirstPrev: h.SHA256, Signature: &AnchorSignature{Alg: "ed25519", KeyID: "k\"<é>&\\\n\x7f", Value: ""}},
	} {
		got, err := encodeAnchor(a)
		require.NoError(t, err)
		want, err := json.Marshal(anchorFile{Schema: anchorSchema, Anchor: a})
		require.NoError(t, err)
		assert.Equal(t, string(want), string(bytes.TrimRight(got, " \n")))
		back, err := decodeAnchor(got)
		require.NoError(t, err)
		assert.Equal(t, a, back)
	}
	_, err := encodeAnchor(Anchor{Head: h, Signature: &AnchorSignature{KeyID: strings.Repeat("k", anchorSize)}})
	require.Error(t, err)
}
