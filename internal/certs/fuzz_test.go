// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package certs

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The fuzz targets read certificate and key files back as `certs show`,
// `certs verify` and recovery do: whatever the files hold, nothing panics.
// Seeds here and under testdata/fuzz/FuzzXxx run with every `go test`;
// `make test-fuzz` fuzzes each target briefly.

// FuzzCertParse parses, renders, canonicalizes and verifies arbitrary
// bytes as a certificate file.
func FuzzCertParse(f *testing.F) {
	s := testSigner(f)
	golden, err := os.ReadFile("testdata/full.golden.json")
	require.NoError(f, err)
	f.Add(golden)
	f.Add(bytes.Replace(golden, []byte(`"pid": 4242`), []byte(`"pid": 4242.0`), 1))
	f.Add(bytes.Replace(golden, []byte(`"agent_id"`), []byte(`"agent_id": "x", "agent_id"`), 1))
	f.Add([]byte(`{"schema":"` + Schema + `","signature":{"alg":"ed25519","key_id":"k","value":"AAAA"}}` + "\n"))
	f.Add([]byte(`{"schema":"` + Schema + `","triggered_at":"not a time","exit":{"signal":"SIGKILL"},"final_state":{"rss_bytes":-1}}`))
	f.Add([]byte(`{"a":"\ud800"}`))
	f.Add([]byte(strings.Repeat("[", 10000)))
	f.Add([]byte(`{"schema":"` + Schema + `"}` + "\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		_ = checkComplete(data)
		if c, err := Parse(data); err == nil {
			var out bytes.Buffer
			_ = Render(&out, c)
			_ = FileName(c)
			if again, err := Marshal(c); err == nil {
				// What Marshal writes parses back, and writes the same again.
				c2, err := Parse(again)
				require.NoError(t, err, "%s", again)
				again2, err := Marshal(c2)
				require.NoError(t, err)
				require.Equal(t, string(again), string(again2))
			}
		} else {
			require.True(t, errors.Is(err, ErrMalformed) || errors.Is(err, ErrSchema), "%v", err)
		}
		canon, err := Canonical(data)
		if err == nil {
			back, err := Canonical(canon)
			require.NoError(t, err, "%s", canon)
			require.Equal(t, string(canon), string(back), "canonical form is a fixed point")
		} else {
			require.ErrorIs(t, err, ErrMalformed)
		}
		verr := Verify(data, s.Public())
		if verr == nil {
			require.NoError(t, err, "a verified file has a canonical form")
		}
		n := 0
		for _, e := range []error{ErrUnsigned, ErrKeyMismatch, ErrBadSignature} {
			if errors.Is(verr, e) {
				n++
			}
		}
		require.True(t, verr == nil || n == 1, "exactly one kind of failure: %v", verr)
	})
}

// FuzzCertKey parses arbitrary bytes as the signing key and as the public
// key files.
func FuzzCertKey(f *testing.F) {
	for _, name := range []string{"testdata/test-only-openssl-ed25519.pem", "testdata/test-only-openssl-ed25519.pub.pem"} {
		data, err := os.ReadFile(name)
		require.NoError(f, err)
		f.Add(data)
	}
	priv := ed25519.NewKeyFromSeed(testSeed)
	f.Add([]byte(priv))
	f.Add([]byte(priv.Seed()))
	f.Add([]byte("e1a9d3c0ffee00112233445566778899aabbccddeeff00112233445566778899\n"))
	f.Add([]byte("-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEA\n-----END PUBLIC KEY-----\n"))
	f.Add([]byte("-----BEGIN RSA PRIVATE KEY-----\nAAAA\n-----END RSA PRIVATE KEY-----\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if k, err := parsePrivateKey(data); err == nil {
			require.Len(t, k, ed25519.PrivateKeySize)
			_, err := NewSigner(k)
			require.NoError(t, err)
		} else {
			require.ErrorIs(t, err, ErrBadKey)
		}
		if k, err := parsePublicKey(data); err == nil {
			require.Len(t, k, ed25519.PublicKeySize)
		} else {
			require.ErrorIs(t, err, ErrBadKey)
		}
	})
}
