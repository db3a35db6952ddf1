// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package procsup

import (
	"time"

	"github.com/hermeskill/hermeskilld/internal/procfs"
)

// SetFreezeWait bounds the autopsy's freeze (tests force a timeout).
func (t *Tree) SetFreezeWait(d time.Duration) { t.freezeWait = d }

// Scanner is the runtime's shared scan of /proc, for tests.
type Scanner = scanner

// NewScanner returns a scanner of fs.
func NewScanner(fs procfs.FS) *Scanner { return newScanner(fs) }

// Scans counts the scans run.
func (s *scanner) Scans() uint64 { return s.runs.Load() }
