// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"bytes"
	"fmt"
	"io"
	"os"
)

// maxKeyFile bounds what LoadKey reads: a provider key is a line.
const maxKeyFile = 64 << 10

// LoadKey reads a provider key from path: the file's one line, without
// surrounding white space. It refuses a file that is not regular, that its
// group or others may read or write (mode 0600 or 0400 is wanted), that is
// empty, or whose key has characters other than printable ASCII without
// spaces. The mode is checked on the opened file, so it is the one read.
// The key itself never appears in an error.
func LoadKey(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("key file: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("key file: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("key file %s: %w: not a regular file", path, ErrKeyInvalid)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return "", fmt.Errorf("key file %s: mode %04o is %w (chmod 600 it)", path, perm, ErrKeyExposed)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxKeyFile+1))
	if err != nil {
		return "", fmt.Errorf("key file: %w", err)
	}
	if len(data) > maxKeyFile {
		return "", fmt.Errorf("key file %s: %w: over %d bytes", path, ErrKeyInvalid, maxKeyFile)
	}
	key := bytes.TrimSpace(data)
	if len(key) == 0 {
		return "", fmt.Errorf("key file %s: %w: empty", path, ErrKeyInvalid)
	}
	for _, c := range key {
		if c <= ' ' || c > '~' {
			return "", fmt.Errorf("key file %s: %w: one line of printable ASCII without spaces is wanted", path, ErrKeyInvalid)
		}
	}
	return string(key), nil
}
