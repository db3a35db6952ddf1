// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package certs

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"github.com/hermeskill/hermeskilld/internal/atomicfile"
)

// ErrIncomplete means a temporary certificate file ends before its last
// byte: its writer died while writing it.
var ErrIncomplete = errors.New("incomplete certificate")

// Recovered is one temporary file Recover dealt with.
type Recovered struct {
	Temp  string // the temporary file Write left
	Final string // the certificate file it was written for
	// Err says why a removed temporary file was not a certificate to keep
	// (ErrIncomplete, ErrMalformed, ErrSchema, a bad signature field); nil
	// when it was a copy of Final.
	Err error
}

// RecoverReport lists what Recover did, for the caller to log.
type RecoverReport struct {
	Promoted []Recovered // complete certificates now at their final name
	Removed  []Recovered // temporary files deleted: incomplete, not certificates, or copies of their final file
	Kept     []Recovered // complete certificates left as they are: a different file is at their final name
}

// Recover completes or clears what a Write interrupted by a crash left in
// dir: a temporary file (".NAME.json.RANDOM.tmp") that no live process is
// writing. Call it before writing certificates, when a supervisor starts.
//
//   - A temporary file holding a whole certificate (it parses, ends with
//     the final newline, and its signature, if any, is well formed: the key
//     is not needed) is made durable, given FileMode and linked to its final
//     name NAME.json, then removed: the certificate is as Write would have
//     left it.
//   - If NAME.json exists already with the same bytes, the temporary file
//     is removed. If it holds anything else, neither is touched: both are
//     reported in Kept for an operator to compare.
//   - Anything else (a partial write, an empty file, not a certificate) is
//     removed, with the reason.
//
// Files being written by another process right now, and files that are not
// Write's temporary files, are left alone (see atomicfile.Leftovers). A dir
// that does not exist holds nothing to recover. The error is for dir itself
// (matching fs.ErrPermission, …) joined with those of single files; the
// report lists what was done either way.
func Recover(dir string) (RecoverReport, error) {
	var rep RecoverReport
	err := atomicfile.Leftovers(dir, func(lo atomicfile.Leftover) error {
		if !strings.HasSuffix(lo.Target, ".json") {
			return nil // another writer's file, not a certificate
		}
		return recoverOne(&rep, lo)
	})
	if errors.Is(err, fs.ErrNotExist) && isMissingDir(dir) {
		return rep, nil
	}
	if len(rep.Promoted)+len(rep.Removed) > 0 {
		err = errors.Join(err, atomicfile.SyncDir(dir))
	}
	if err != nil {
		return rep, fmt.Errorf("recover certificates in %s: %w", dir, err)
	}
	return rep, nil
}

func isMissingDir(dir string) bool {
	_, err := os.Stat(dir)
	return errors.Is(err, fs.ErrNotExist)
}

func recoverOne(rep *RecoverReport, lo atomicfile.Leftover) error {
	r := Recovered{Temp: lo.Path, Final: lo.Target}
	data, err := io.ReadAll(io.LimitReader(lo.File, MaxSize+1))
	if err != nil {
		return fmt.Errorf("read %s: %w", lo.Path, err)
	}
	if r.Err = checkComplete(data); r.Err != nil {
		if err := os.Remove(lo.Path); err != nil {
			return err
		}
		rep.Removed = append(rep.Removed, r)
		return nil
	}
	final, err := os.ReadFile(lo.Target)
	switch {
	case err == nil && bytes.Equal(final, data):
		if err := os.Remove(lo.Path); err != nil {
			return err
		}
		rep.Removed = append(rep.Removed, r)
		return nil
	case err == nil || !errors.Is(err, fs.ErrNotExist):
		// Something else is at the final name (or cannot be read): a
		// certificate is never overwritten.
		rep.Kept = append(rep.Kept, r)
		return nil
	}
	// The writer may have died before its fchmod and fsync.
	if err := lo.File.Chmod(FileMode); err != nil {
		return err
	}
	if err := lo.File.Sync(); err != nil {
		return err
	}
	// link(2), unlike rename(2), fails when the final name exists: nothing
	// written there since the check above is replaced.
	if err := os.Link(lo.Path, lo.Target); err != nil {
		if errors.Is(err, fs.ErrExist) {
			rep.Kept = append(rep.Kept, r)
			return nil
		}
		return err
	}
	rep.Promoted = append(rep.Promoted, r)
	return os.Remove(lo.Path)
}

// checkComplete says why data is not a whole certificate as Write writes
// it, or nil.
func checkComplete(data []byte) error {
	if len(data) > MaxSize {
		return fmt.Errorf("%w: larger than %d bytes", ErrMalformed, MaxSize)
	}
	if !bytes.HasSuffix(data, []byte("}\n")) {
		return fmt.Errorf("%w: %d bytes, without the closing brace and newline", ErrIncomplete, len(data))
	}
	c, err := Parse(data)
	if err != nil {
		return err
	}
	if s := c.Signature; s != nil {
		raw, err := base64.StdEncoding.Strict().DecodeString(s.Value)
		if s.Alg != AlgEd25519 || s.KeyID == "" || err != nil || len(raw) != ed25519.SignatureSize {
			return malformed("signature is not an ed25519 signature with a key_id")
		}
	}
	return nil
}
