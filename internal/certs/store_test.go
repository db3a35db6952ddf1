// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package certs

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestWriteReadRoundTrip(t *testing.T) {
	for _, signed := range []bool{false, true} {
		t.Run(map[bool]string{false: "unsigned", true: "signed"}[signed], func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "state", "certs")
			var s *Signer
			if signed {
				s = testSigner(t)
			}
			c := fullCert()

			path, err := Write(dir, c, s)
			require.NoError(t, err)

			assert.Equal(t, filepath.Join(dir, FileName(c)), path)
			got, raw, err := Read(path)
			require.NoError(t, err)
			assert.Equal(t, c, got, "Read(Write(c)) == c")
			want, err := Marshal(c)
			require.NoError(t, err)
			assert.Equal(t, string(want), string(raw), "the file holds Marshal(c)")
			if signed {
				require.NotNil(t, c.Signature, "Write signed c")
				require.NoError(t, Verify(raw, s.Public()))
			} else {
				assert.Nil(t, c.Signature)
				require.ErrorIs(t, Verify(raw, testSigner(t).Public()), ErrUnsigned)
			}

			fi, err := os.Stat(path)
			require.NoError(t, err)
			assert.Equal(t, FileMode, fi.Mode(), "file mode exactly 0640")
			di, err := os.Stat(dir)
			require.NoError(t, err)
			assert.Equal(t, os.ModeDir|DirMode, di.Mode(), "directory created 0750")
			assert.Equal(t, []string{filepath.Base(path)}, dirNames(t, dir), "no temporary file left")
		})
	}
}

func TestWriteFileModeIgnoresUmask(t *testing.T) {
	old := syscall.Umask(0o077) // not parallel: the umask is process-wide
	defer syscall.Umask(old)
	path, err := Write(t.TempDir(), fullCert(), nil)
	require.NoError(t, err)
	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, FileMode, fi.Mode())
}

func TestWriteFillsSchemaAndID(t *testing.T) {
	c := &Certificate{AgentID: "a", TriggeredAt: time.Now()}
	path, err := Write(t.TempDir(), c, nil)
	require.NoError(t, err)
	assert.Equal(t, Schema, c.Schema)
	assert.Regexp(t, uuidV7, c.CertID)
	assert.Contains(t, path, c.CertID)
}

func TestWriteRejectsOtherSchema(t *testing.T) {
	dir := t.TempDir()
	_, err := Write(dir, &Certificate{Schema: "hermeskill.death-certificate.v2"}, nil)
	require.ErrorIs(t, err, ErrSchema)
	assert.Empty(t, dirNames(t, dir))
}

func TestWriteUnwritableDir(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	_, err := Write(filepath.Join(file, "certs"), fullCert(), nil)
	require.ErrorIs(t, err, syscall.ENOTDIR)
}

func TestWriteSameCertTwiceReplaces(t *testing.T) {
	dir := t.TempDir()
	c := fullCert()
	p1, err := Write(dir, c, nil)
	require.NoError(t, err)
	p2, err := Write(dir, c, testSigner(t))
	require.NoError(t, err)
	assert.Equal(t, p1, p2)
	assert.Len(t, dirNames(t, dir), 1)
}

func TestReadErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), 0o640))
		return p
	}

	_, _, err := Read(filepath.Join(dir, "missing.json"))
	require.ErrorIs(t, err, fs.ErrNotExist)

	_, _, err = Read(write("garbage.json", "not json"))
	require.ErrorIs(t, err, ErrMalformed)

	_, _, err = Read(write("type.json", `{"schema":"`+Schema+`","pid":"4242"}`))
	require.ErrorIs(t, err, ErrMalformed)

	_, _, err = Read(write("v2.json", `{"schema":"hermeskill.death-certificate.v2"}`))
	require.ErrorIs(t, err, ErrSchema)

	_, _, err = Read(write("other.json", `{"name":"package.json"}`))
	require.ErrorIs(t, err, ErrSchema)

	_, _, err = Read(dir)
	require.Error(t, err, "a directory is not a certificate")

	big := write("big.json", `{"schema":"`+Schema+`","trigger_reason":"`+strings.Repeat("x", MaxSize)+`"}`)
	_, _, err = Read(big)
	require.ErrorContains(t, err, "larger than")
}

func TestParse(t *testing.T) {
	c := fullCert()
	data, err := Marshal(c)
	require.NoError(t, err)
	got, err := Parse(data)
	require.NoError(t, err)
	again, err := Marshal(got)
	require.NoError(t, err)
	assert.Equal(t, string(data), string(again), "a parsed certificate marshals to the same bytes")

	for _, tc := range []struct {
		data string
		want error
	}{
		{"not json", ErrMalformed},
		{`{"schema":"` + Schema + `","pid":"4242"}`, ErrMalformed},
		{`{"schema":"hermeskill.death-certificate.v2"}`, ErrSchema},
		{`{}`, ErrSchema},
	} {
		_, err := Parse([]byte(tc.data))
		require.ErrorIs(t, err, tc.want, tc.data)
	}
}

func TestList(t *testing.T) {
	dir := t.TempDir()
	base := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	var want []string
	// Written newest first, with ids that do not sort by time.
	for i, off := range []time.Duration{3 * time.Hour, 2 * time.Hour, 0, time.Hour} {
		c := fullCert()
		c.CertID = NewID()
		c.AgentID = "agent-" + string(rune('d'-i))
		c.TriggeredAt = base.Add(off)
		p, err := Write(dir, c, nil)
		require.NoError(t, err)
		want = append(want, p)
	}
	want = []string{want[2], want[3], want[1], want[0]}

	// Things List must not take for certificates, or must report.
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".20261202T100000.000Z_x_y.json.0123456789abcdef.tmp"), []byte("{"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "README.txt"), []byte("hi"), 0o600))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "sub.json"), 0o700))
	require.NoError(t, syscall.Mkfifo(filepath.Join(dir, "fifo.json"), 0o600))
	corrupt := filepath.Join(dir, "corrupt.json")
	require.NoError(t, os.WriteFile(corrupt, []byte(`{"schema":`), 0o600))
	old := base.Add(-time.Hour) // placed by its mtime: before every certificate
	require.NoError(t, os.Chtimes(corrupt, old, old))

	entries, err := List(dir)
	require.NoError(t, err)

	var good, bad []string
	for _, e := range entries {
		if e.Err != nil {
			assert.Nil(t, e.Cert)
			bad = append(bad, filepath.Base(e.Path))
			continue
		}
		require.NotNil(t, e.Cert)
		good = append(good, e.Path)
	}
	assert.Equal(t, want, good, "oldest first")
	assert.ElementsMatch(t, []string{"corrupt.json", "sub.json", "fifo.json"}, bad)
	assert.Equal(t, corrupt, entries[0].Path, "a bad file is listed at its mtime")
	assert.ErrorIs(t, entries[0].Err, ErrMalformed)
}

func TestListMissingDir(t *testing.T) {
	_, err := List(filepath.Join(t.TempDir(), "none"))
	require.ErrorIs(t, err, fs.ErrNotExist)
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}
