// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package certs

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// signedFile writes the full certificate signed by the test key and returns
// the file's bytes.
func signedFile(t *testing.T) []byte {
	t.Helper()
	path, err := Write(t.TempDir(), fullCert(), testSigner(t))
	require.NoError(t, err)
	_, raw, err := Read(path)
	require.NoError(t, err)
	return raw
}

func TestSignVerify(t *testing.T) {
	s := testSigner(t)
	raw := signedFile(t)
	require.NoError(t, Verify(raw, s.Public()))

	c, err := Parse(raw)
	require.NoError(t, err)
	assert.Equal(t, AlgEd25519, c.Signature.Alg)
	assert.Equal(t, s.KeyID(), c.Signature.KeyID)
	assert.Equal(t, KeyID(s.Public()), s.KeyID())
	assert.Regexp(t, `^ed25519:[0-9a-f]{16}$`, s.KeyID())
}

func TestSignReplacesOldSignature(t *testing.T) {
	c := fullCert()
	other, err := NewSigner(ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, 32)))
	require.NoError(t, err)
	require.NoError(t, other.Sign(c))
	require.NoError(t, testSigner(t).Sign(c)) // the old signature is not signed over
	b, err := Marshal(c)
	require.NoError(t, err)
	require.NoError(t, Verify(b, testSigner(t).Public()))
	require.ErrorIs(t, Verify(b, other.Public()), ErrKeyMismatch)
}

// TestVerifyDetectsEveryByteChange changes each byte of a signed file, one
// at a time, to a different byte of the same class (digit to digit, letter
// to letter, other punctuation to 'x'): every value, key, step duration,
// pid digit or letter of the agent id. Each change must fail verification
// (ErrBadSignature, or for a byte of the signature member ErrUnsigned or
// ErrKeyMismatch). Whitespace is left alone: it is not content.
func TestVerifyDetectsEveryByteChange(t *testing.T) {
	pub := testSigner(t).Public()
	raw := signedFile(t)
	sigStart := bytes.Index(raw, []byte(`  "signature": {`))
	require.Positive(t, sigStart)

	checked := 0
	for i, b := range raw {
		var nb byte
		switch {
		case b == ' ' || b == '\n' || b == '\t' || b == '\r':
			continue
		case '0' <= b && b <= '9':
			nb = '0' + (b-'0'+1)%10
		case 'a' <= b && b <= 'z':
			nb = 'a' + (b-'a'+1)%26
		case 'A' <= b && b <= 'Z':
			nb = 'A' + (b-'A'+1)%26
		default:
			nb = 'x'
		}
		mut := bytes.Clone(raw)
		mut[i] = nb
		err := Verify(mut, pub)
		checked++
		if i < sigStart {
			if !assert.ErrorIs(t, err, ErrBadSignature, "byte %d %q -> %q near %q", i, b, nb, context(raw, i)) {
				return
			}
			continue
		}
		if !assert.Error(t, err, "byte %d %q -> %q near %q", i, b, nb, context(raw, i)) {
			return
		}
	}
	t.Logf("%d single-byte changes, all detected", checked)

	// The edits a forger would try first, explicitly.
	for _, tc := range []struct{ from, to string }{
		{`"pid": 4242,`, `"pid": 4243,`},
		{`"agent_id": "research-bot"`, `"agent_id": "research-bou"`},
		{`no heartbeat for 30.0s (timeout 30s) <after>`, `no heartbeat for 30.0s (timeout 31s) <after>`},
		{`"duration_ms": 0.4,`, `"duration_ms": 0.5,`},
		{`"duration_ms": 0.4,`, `"duration_ms": 0.40,`}, // numbers keep their text
		{`"core_dumped": false`, `"core_dumped": true`},
		{`"operator": null`, `"operator": "x"`},
		{`"survivors": []`, `"survivors": [{}]`},
		{`"team": "research"`, `"team": "research", "env": "SECRET=1"`},
		{`"seq": 1234,`, `"seq": 1233,`}, // the audit log's head
		{`"audit_anchor": {`, `"audit_anchor": null, "x": {`},
	} {
		mut := bytes.Replace(raw, []byte(tc.from), []byte(tc.to), 1)
		require.NotEqual(t, raw, mut, tc.from)
		assert.ErrorIs(t, Verify(mut, pub), ErrBadSignature, "%s -> %s", tc.from, tc.to)
	}
}

func context(b []byte, i int) string {
	return string(b[max(0, i-20):min(len(b), i+20)])
}

// TestVerifyIgnoresLayout: the signature is over canonical content, so
// re-indenting, compacting or reordering keys keeps it valid.
func TestVerifyIgnoresLayout(t *testing.T) {
	pub := testSigner(t).Public()
	raw := signedFile(t)

	var compact, tabs bytes.Buffer
	require.NoError(t, json.Compact(&compact, raw))
	require.NoError(t, json.Indent(&tabs, compact.Bytes(), "\t", "\t"))
	crlf := bytes.ReplaceAll(raw, []byte("\n"), []byte("\r\n"))

	// Reordered: decoded into a map and encoded with sorted keys (and HTML
	// escaping, so "<" becomes "\u003c": an equivalent escape).
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	require.NoError(t, dec.Decode(&m))
	reordered, err := json.MarshalIndent(m, "", "    ")
	require.NoError(t, err)
	require.Contains(t, string(reordered), `\u003cafter\u003e`)

	for name, b := range map[string][]byte{"compact": compact.Bytes(), "tabs": tabs.Bytes(), "crlf": crlf, "reordered": reordered} {
		assert.NoError(t, Verify(b, pub), name)
	}
}

func TestVerifyWrongKey(t *testing.T) {
	other, _, err := ed25519.GenerateKey(nil)
	require.NoError(t, err)
	err = Verify(signedFile(t), other)
	require.ErrorIs(t, err, ErrKeyMismatch)
	assert.NotErrorIs(t, err, ErrBadSignature)
}

func TestVerifyKeyIDForged(t *testing.T) {
	// Signed by another key but claiming ours: the key_id matches, the
	// signature does not.
	other, err := NewSigner(ed25519.NewKeyFromSeed(bytes.Repeat([]byte{9}, 32)))
	require.NoError(t, err)
	c := fullCert()
	require.NoError(t, other.Sign(c))
	c.Signature.KeyID = testSigner(t).KeyID()
	b, err := Marshal(c)
	require.NoError(t, err)
	require.ErrorIs(t, Verify(b, testSigner(t).Public()), ErrBadSignature)
}

func TestVerifyUnsigned(t *testing.T) {
	b, err := Marshal(fullCert())
	require.NoError(t, err)
	pub := testSigner(t).Public()
	require.ErrorIs(t, Verify(b, pub), ErrUnsigned)
	withNull := bytes.Replace(b, []byte(`"schema"`), []byte(`"signature": null, "schema"`), 1)
	require.ErrorIs(t, Verify(withNull, pub), ErrUnsigned)

	// Removing the signature of a signed certificate makes it unsigned.
	c := fullCert()
	require.NoError(t, testSigner(t).Sign(c))
	c.Signature = nil
	b, err = Marshal(c)
	require.NoError(t, err)
	require.ErrorIs(t, Verify(b, pub), ErrUnsigned)
}

func TestVerifySignatureMalleability(t *testing.T) {
	pub := testSigner(t).Public()
	raw := signedFile(t)
	c, err := Parse(raw)
	require.NoError(t, err)
	v := c.Signature.Value
	require.True(t, strings.HasSuffix(v, "=="))
	// The last character before "==" carries 4 unused bits: a lax decoder
	// reads "...A==" and "...B==" alike when only those bits differ.
	last := v[len(v)-3]
	idx := strings.IndexByte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/", last)
	alt := "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"[idx^1]
	forged := v[:len(v)-3] + string(alt) + "=="
	lax, err := base64.StdEncoding.DecodeString(forged)
	require.NoError(t, err)
	orig, _ := base64.StdEncoding.DecodeString(v)
	require.Equal(t, orig, lax, "the forged text decodes to the same signature when not strict")

	mut := bytes.Replace(raw, []byte(v), []byte(forged), 1)
	require.ErrorIs(t, Verify(mut, pub), ErrBadSignature)

	mut = bytes.Replace(raw, []byte(v), []byte(strings.TrimSuffix(v, "==")), 1)
	require.ErrorIs(t, Verify(mut, pub), ErrBadSignature, "no padding")
}

func TestVerifyMalformed(t *testing.T) {
	pub := testSigner(t).Public()
	raw := signedFile(t)
	// A duplicate key placed first: encoding/json keeps the last one, other
	// parsers the first; such a file must not verify.
	dupFirst := bytes.Replace(raw, []byte(`"pid": 4242,`), []byte(`"pid": 1, "pid": 4242,`), 1)
	loneSurrogate := bytes.Replace(raw, []byte(`"research-bot"`), []byte(`"research-bot\ud800"`), 1)
	for name, b := range map[string][]byte{
		"empty":           nil,
		"not json":        []byte("death certificate"),
		"array":           []byte(`[1]`),
		"trailing":        append(bytes.Clone(raw), []byte(`{}`)...),
		"truncated":       raw[:len(raw)/2],
		"invalid utf8":    bytes.Replace(raw, []byte("research-bot"), []byte("research-b\xfft"), 1),
		"duplicate key":   dupFirst,
		"lone surrogate":  loneSurrogate,
		"signature array": bytes.Replace(raw, []byte(`"signature": {`), []byte(`"signature": [], "x": {`), 1),
	} {
		err := Verify(b, pub)
		assert.ErrorIs(t, err, ErrBadSignature, name)
		assert.ErrorIs(t, err, ErrMalformed, name)
	}
}

func TestCanonical(t *testing.T) {
	in := []byte(`{
		"z": 1.50, "a": [3, {"y": "<&>", "b": null}], "signature": {"x": 1},
		"m": {"signature": "nested stays"}, "e": "\u00e9\n", "big": 12345678901234567890, "exp": 1e3
	}`)
	got, err := Canonical(in)
	require.NoError(t, err)
	assert.Equal(t, `{"a":[3,{"b":null,"y":"<&>"}],"big":12345678901234567890,"e":"é\n","exp":1e3,"m":{"signature":"nested stays"},"z":1.50}`, string(got))

	// Valid surrogate pairs are fine.
	got, err = Canonical([]byte(`{"s":"\ud83d\ude00"}`))
	require.NoError(t, err)
	assert.Equal(t, `{"s":"😀"}`, string(got))
	_, err = Canonical([]byte(`{"s":"\ude00"}`))
	require.ErrorIs(t, err, ErrMalformed)
	_, err = Canonical([]byte(`{"s":"\ud83d x"}`))
	require.ErrorIs(t, err, ErrMalformed)
	// An escaped backslash before "u" is not an escape.
	_, err = Canonical([]byte(`{"s":"\\ud800"}`))
	require.NoError(t, err)
}

func writeKey(t *testing.T, data []byte, perm os.FileMode) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "key")
	require.NoError(t, os.WriteFile(p, data, perm))
	require.NoError(t, os.Chmod(p, perm))
	return p
}

func TestLoadSignerRefusesOpenKeyFile(t *testing.T) {
	for _, perm := range []os.FileMode{0o644, 0o640, 0o604, 0o660, 0o601, 0o610} {
		p := writeKey(t, testSeed, perm)
		_, err := LoadSigner(p)
		require.ErrorIs(t, err, ErrKeyFileMode, "%04o", perm)
		assert.Contains(t, err.Error(), p)
		assert.Contains(t, err.Error(), "chmod 600")
	}
	for _, perm := range []os.FileMode{0o600, 0o400} {
		_, err := LoadSigner(writeKey(t, testSeed, perm))
		require.NoError(t, err, "%04o", perm)
	}
}

func TestGenerateKeyRoundTrip(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "signing.key")
	pubPath, err := GenerateKey(path)
	require.NoError(t, err)
	assert.Equal(t, path+".pub", pubPath)

	for p, mode := range map[string]os.FileMode{path: 0o600, pubPath: 0o644} {
		fi, err := os.Stat(p)
		require.NoError(t, err)
		assert.Equal(t, mode, fi.Mode(), p)
	}
	privPEM, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(string(privPEM), "-----BEGIN PRIVATE KEY-----\n"))
	pubPEM, err := os.ReadFile(pubPath)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(string(pubPEM), "-----BEGIN PUBLIC KEY-----\n"))

	s, err := LoadSigner(path)
	require.NoError(t, err)
	pub, err := LoadPublicKey(pubPath)
	require.NoError(t, err)
	assert.Equal(t, s.Public(), pub)
	assert.Equal(t, s.KeyID(), KeyID(pub))

	certPath, err := Write(t.TempDir(), fullCert(), s)
	require.NoError(t, err)
	_, raw, err := Read(certPath)
	require.NoError(t, err)
	require.NoError(t, Verify(raw, pub))

	// Refuses to overwrite either file, and leaves them as they were.
	_, err = GenerateKey(path)
	require.ErrorIs(t, err, fs.ErrExist)
	again, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, privPEM, again)

	onlyPub := filepath.Join(dir, "other.key")
	require.NoError(t, os.WriteFile(onlyPub+".pub", []byte("keep me"), 0o644))
	_, err = GenerateKey(onlyPub)
	require.ErrorIs(t, err, fs.ErrExist)
	_, err = os.Stat(onlyPub)
	require.ErrorIs(t, err, fs.ErrNotExist, "the private key claimed first is removed again")
	kept, err := os.ReadFile(onlyPub + ".pub")
	require.NoError(t, err)
	assert.Equal(t, "keep me", string(kept))
}

func TestLoadKeyEncodings(t *testing.T) {
	priv := ed25519.NewKeyFromSeed(testSeed)
	pub := priv.Public().(ed25519.PublicKey)
	wantID := KeyID(pub)

	privFiles := map[string][]byte{
		"seed binary":     testSeed,
		"seed hex":        []byte(hex.EncodeToString(testSeed) + "\n"),
		"seed HEX":        []byte(strings.ToUpper(hex.EncodeToString(testSeed))),
		"seed base64":     []byte(base64.StdEncoding.EncodeToString(testSeed) + "\n"),
		"seed base64 raw": []byte(base64.RawStdEncoding.EncodeToString(testSeed)),
		"key binary":      priv,
		"key hex":         []byte(hex.EncodeToString(priv) + "\n"),
		"key base64":      []byte(base64.StdEncoding.EncodeToString(priv)),
	}
	for name, data := range privFiles {
		s, err := LoadSigner(writeKey(t, data, 0o600))
		if assert.NoError(t, err, name) {
			assert.Equal(t, wantID, s.KeyID(), name)
		}
	}
	pubFiles := map[string][]byte{
		"binary": pub,
		"hex":    []byte(hex.EncodeToString(pub) + "\n"),
		"base64": []byte(base64.StdEncoding.EncodeToString(pub) + "\n"),
	}
	for name, data := range pubFiles {
		got, err := LoadPublicKey(writeKey(t, data, 0o644))
		if assert.NoError(t, err, name) {
			assert.Equal(t, pub, got, name)
		}
	}
}

// TestLoadOpenSSLKeys reads keys made by `openssl genpkey -algorithm
// ed25519` and `openssl pkey -pubout` (test-only keys in testdata/).
func TestLoadOpenSSLKeys(t *testing.T) {
	pemData, err := os.ReadFile("testdata/test-only-openssl-ed25519.pem")
	require.NoError(t, err)
	s, err := LoadSigner(writeKey(t, pemData, 0o600))
	require.NoError(t, err)
	pub, err := LoadPublicKey("testdata/test-only-openssl-ed25519.pub.pem")
	require.NoError(t, err)
	assert.Equal(t, s.Public(), pub)
}

func TestLoadKeyErrors(t *testing.T) {
	priv := ed25519.NewKeyFromSeed(testSeed)
	badPair := bytes.Clone(priv)
	badPair[40] ^= 1
	pubPEM, err := os.ReadFile("testdata/test-only-openssl-ed25519.pub.pem")
	require.NoError(t, err)
	privPEM, err := os.ReadFile("testdata/test-only-openssl-ed25519.pem")
	require.NoError(t, err)

	for name, data := range map[string][]byte{
		"empty":             nil,
		"31 bytes":          testSeed[:31],
		"public PEM":        pubPEM,
		"inconsistent pair": badPair,
		"rsa-ish PEM":       []byte("-----BEGIN RSA PRIVATE KEY-----\nAAAA\n-----END RSA PRIVATE KEY-----\n"),
		"garbage PKCS8":     []byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"),
	} {
		_, err := LoadSigner(writeKey(t, data, 0o600))
		assert.ErrorIs(t, err, ErrBadKey, name)
	}
	_, err = LoadPublicKey(writeKey(t, privPEM, 0o600))
	require.ErrorIs(t, err, ErrBadKey)
	assert.Contains(t, err.Error(), "PUBLIC KEY")
	_, err = LoadSigner(filepath.Join(t.TempDir(), "missing"))
	require.ErrorIs(t, err, fs.ErrNotExist)
	_, err = NewSigner(priv[:10])
	require.ErrorIs(t, err, ErrBadKey)
}

// TestCanonicalEscapingPinned pins how encoding/json writes strings in the
// canonical form. Signatures are verified by recomputing it, so if a Go
// release changed this (Go 1.22 did, for \b and \f), certificates signed
// before would stop verifying: this test must fail first.
func TestCanonicalEscapingPinned(t *testing.T) {
	in := `{"s":"\u0000\u0001\b\f\n\r\t\u001b\u007f\u0080\u2028\u2029\ufeff\"\\/<>&é😀"}`
	got, err := Canonical([]byte(in))
	require.NoError(t, err)
	want := `{"s":"\u0000\u0001\b\f\n\r\t\u001b` + "\x7f\u0080" + `\u2028\u2029` + "\ufeff" + `\"\\/<>&é😀"}`
	assert.Equal(t, want, string(got))
}

func TestVerifyBadPublicKey(t *testing.T) {
	require.ErrorIs(t, Verify(signedFile(t), ed25519.PublicKey{1, 2, 3}), ErrBadKey)
}
