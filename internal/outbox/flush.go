// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package outbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Flush asks the sender to try the pending items now, cutting short a
// backoff wait in progress (and starting the backoff afresh), then waits
// until no item is pending, ctx ends or the Outbox is closed, and returns
// the Stats at that moment. Items still pending stay on disk for the next
// Open. Nothing is sent unless Run is active; Flush never sends itself.
//
// It is how a short-lived process (supervise) ends: its certificate was
// queued moments ago, and it waits a bounded time for the delivery.
func (o *Outbox) Flush(ctx context.Context) Stats {
	select {
	case o.flush <- struct{}{}:
	default: // one is pending already
	}
	for {
		o.mu.Lock()
		st, ch, closed := o.stats, o.change, o.closed
		o.mu.Unlock()
		if st.Pending == 0 || closed {
			return st
		}
		select {
		case <-ctx.Done():
			return o.Stats()
		case <-ch:
		}
	}
}

// IsPending reports whether the certificate certID waits in the outbox,
// not yet delivered nor parked.
func (o *Outbox) IsPending(certID string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	_, ok := o.byID[certID]
	return ok
}

// IsParked reports whether the certificate certID was refused by the
// control plane and lies in parkedDir.
func (o *Outbox) IsParked(certID string) bool {
	if checkID(certID) != nil {
		return false
	}
	_, err := os.Stat(filepath.Join(o.opts.Dir, parkedDir, certID+itemExt))
	return err == nil
}

// Dir is the outbox's directory.
func (o *Outbox) Dir() string { return o.opts.Dir }

// ErrTokenExposed: checkTokenFile found the token file readable or
// writable by group or others.
var ErrTokenExposed = errors.New("readable or writable by group or others")

// checkTokenFile checks the bearer token file as the other secret files
// of hermeskilld are checked (signing keys, provider keys): a regular
// file, of mode 0600 or 0400 (nothing for group or others), readable and
// not empty. The token itself never appears in an error. The outbox reads
// the file again at each attempt; this is the check at start.
func checkTokenFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("token file: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	switch {
	case err != nil:
		return fmt.Errorf("token file: %w", err)
	case !fi.Mode().IsRegular():
		return fmt.Errorf("token file %s: not a regular file", path)
	case fi.Mode().Perm()&0o077 != 0:
		return fmt.Errorf("token file %s: mode %04o is %w (chmod 600 it)", path, fi.Mode().Perm(), ErrTokenExposed)
	}
	data, err := io.ReadAll(io.LimitReader(f, 64<<10))
	switch {
	case err != nil:
		return fmt.Errorf("token file: %w", err)
	case strings.TrimSpace(string(data)) == "":
		return fmt.Errorf("token file %s is empty", path)
	}
	return nil
}
