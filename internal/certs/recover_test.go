// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package certs

import (
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// leftTemp writes what a Write killed before its rename leaves: the
// temporary file, named as atomicfile names it, mode 0600, holding data. It
// returns the temporary and the final path.
func leftTemp(t *testing.T, dir string, c *Certificate, data []byte) (tmp, final string) {
	t.Helper()
	final = filepath.Join(dir, FileName(c))
	tmp = filepath.Join(dir, "."+FileName(c)+".0123456789abcdef.tmp")
	require.NoError(t, os.WriteFile(tmp, data, 0o600))
	return tmp, final
}

func marshalled(t *testing.T, c *Certificate, s *Signer) []byte {
	t.Helper()
	if s != nil {
		require.NoError(t, s.Sign(c))
	}
	data, err := Marshal(c)
	require.NoError(t, err)
	return data
}

func TestRecoverPromotesACompleteCertificate(t *testing.T) {
	for _, signed := range []bool{false, true} {
		t.Run(map[bool]string{false: "unsigned", true: "signed"}[signed], func(t *testing.T) {
			dir := t.TempDir()
			var s *Signer
			if signed {
				s = testSigner(t)
			}
			c := fullCert()
			data := marshalled(t, c, s)
			tmp, final := leftTemp(t, dir, c, data)

			rep, err := Recover(dir)

			require.NoError(t, err)
			assert.Equal(t, RecoverReport{Promoted: []Recovered{{Temp: tmp, Final: final}}}, rep)
			got, raw, err := Read(final)
			require.NoError(t, err)
			assert.Equal(t, data, raw)
			assert.Equal(t, c, got)
			if signed {
				require.NoError(t, Verify(raw, s.Public()))
			}
			fi, err := os.Stat(final)
			require.NoError(t, err)
			assert.Equal(t, FileMode, fi.Mode(), "as Write would have left it")
			assert.Equal(t, []string{FileName(c)}, dirNames(t, dir))
		})
	}
}

func TestRecoverRemovesWhatIsNotACertificate(t *testing.T) {
	whole := marshalled(t, fullCert(), testSigner(t))
	badSig := marshalled(t, fullCert(), nil)
	badSig = append(badSig[:len(badSig)-2], []byte(`,"signature":{"alg":"ed25519","key_id":"k","value":"c2hvcnQ="}}`+"\n")...)
	tests := []struct {
		name string
		data []byte
		want error
	}{
		{"cut mid-write", whole[:len(whole)/2], ErrIncomplete},
		{"all but the last newline", whole[:len(whole)-1], ErrIncomplete},
		{"empty", nil, ErrIncomplete},
		{"not a certificate", []byte(`{"name":"package.json"}` + "\n"), ErrSchema},
		{"not JSON", []byte("{{}\n"), ErrMalformed},
		{"a signature that cannot be one", badSig, ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			tmp, final := leftTemp(t, dir, fullCert(), tt.data)

			rep, err := Recover(dir)

			require.NoError(t, err)
			require.Len(t, rep.Removed, 1)
			assert.Empty(t, rep.Promoted)
			assert.Equal(t, tmp, rep.Removed[0].Temp)
			assert.Equal(t, final, rep.Removed[0].Final)
			assert.ErrorIs(t, rep.Removed[0].Err, tt.want)
			assert.Empty(t, dirNames(t, dir))
		})
	}
}

func TestRecoverBesideItsFinalFile(t *testing.T) {
	t.Run("the same certificate", func(t *testing.T) {
		dir := t.TempDir()
		c := fullCert()
		final, err := Write(dir, c, nil)
		require.NoError(t, err)
		tmp, _ := leftTemp(t, dir, c, marshalled(t, c, nil))

		rep, err := Recover(dir)

		require.NoError(t, err)
		assert.Equal(t, RecoverReport{Removed: []Recovered{{Temp: tmp, Final: final}}}, rep)
		assert.Equal(t, []string{filepath.Base(final)}, dirNames(t, dir))
	})
	t.Run("a different file", func(t *testing.T) {
		dir := t.TempDir()
		c := fullCert()
		final, err := Write(dir, c, nil)
		require.NoError(t, err)
		other := fullCert()
		other.TriggerReason = "another story"
		tmp, _ := leftTemp(t, dir, c, marshalled(t, other, nil))
		before, err := os.ReadFile(final)
		require.NoError(t, err)

		rep, err := Recover(dir)

		require.NoError(t, err)
		assert.Equal(t, RecoverReport{Kept: []Recovered{{Temp: tmp, Final: final}}}, rep)
		after, err := os.ReadFile(final)
		require.NoError(t, err)
		assert.Equal(t, before, after, "a certificate is never overwritten")
		assert.FileExists(t, tmp, "both are kept for an operator")
	})
}

func TestRecoverLeavesOtherFilesAlone(t *testing.T) {
	dir := t.TempDir()
	c := fullCert()
	final, err := Write(dir, c, nil)
	require.NoError(t, err)
	others := map[string]string{
		"labels.jsonl": `{"cert_id":"x"}` + "\n",
		"notes.txt":    "hi",
		".hidden.json": "{",
		// atomicfile's, but not for a certificate.
		".labels.jsonl.0123456789abcdef.tmp": "{",
		// Not atomicfile's: the random part is not 16 hex digits.
		".x.json.0123.tmp": "{",
	}
	for name, data := range others {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600))
	}
	require.NoError(t, os.Mkdir(filepath.Join(dir, ".d.json.0123456789abcdef.tmp"), 0o700))
	// A certificate being written by another process right now: its
	// writer holds the lock.
	busy, _ := leftTemp(t, dir, &Certificate{AgentID: "busy", CertID: "b"}, []byte(`{"schema":`))
	f, err := os.Open(busy)
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, unix.Flock(int(f.Fd()), unix.LOCK_EX))
	before := dirNames(t, dir)

	rep, err := Recover(dir)

	require.NoError(t, err)
	assert.Equal(t, RecoverReport{}, rep)
	assert.Equal(t, before, dirNames(t, dir))
	assert.Contains(t, before, filepath.Base(final))
	for name, data := range others {
		got, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		assert.Equal(t, data, string(got), name)
	}
}

func TestRecoverMissingDir(t *testing.T) {
	rep, err := Recover(filepath.Join(t.TempDir(), "certs"))
	require.NoError(t, err, "nothing written yet, nothing to recover")
	assert.Equal(t, RecoverReport{}, rep)
}

func TestRecoverUnreadableDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	require.NoError(t, os.Mkdir(dir, 0o000))
	t.Cleanup(func() { os.Chmod(dir, 0o700) })

	var err error
	withoutDACOverride(t, func() { _, err = Recover(dir) })

	require.ErrorIs(t, err, fs.ErrPermission)
	assert.Equal(t, "recover certificates in "+dir+": read dir "+dir+": permission denied", err.Error())
}

// withoutDACOverride runs fn on an OS thread without CAP_DAC_OVERRIDE and
// CAP_DAC_READ_SEARCH, so that permission bits bind even when the tests run
// as root (capabilities(7): they are per thread). The thread is never
// unlocked, so it ends with its goroutine and no other code runs on it.
func withoutDACOverride(t *testing.T, fn func()) {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
		var data [2]unix.CapUserData
		if err := unix.Capget(&hdr, &data[0]); err != nil {
			errc <- err
			return
		}
		data[0].Effective &^= 1<<unix.CAP_DAC_OVERRIDE | 1<<unix.CAP_DAC_READ_SEARCH
		if err := unix.Capset(&hdr, &data[0]); err != nil {
			errc <- err
			return
		}
		fn()
		errc <- nil
	}()
	require.NoError(t, <-errc)
}
