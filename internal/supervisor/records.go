// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package supervisor

import (
	"go.uber.org/zap"

	"github.com/hermeskill/hermeskilld/internal/audit"
	"github.com/hermeskill/hermeskilld/internal/certs"
)

// RecoverCerts finishes what a crash left in a certificates directory,
// before any agent runs: a complete certificate still in its temp file is
// put in place, anything half-written removed. A failure is logged and
// never keeps agents from running.
func RecoverCerts(dir string, log *zap.Logger) {
	rep, err := certs.Recover(dir)
	if err != nil {
		log.Warn("certificates left by a crash not recovered", zap.Error(err))
	}
	for _, r := range rep.Promoted {
		log.Warn("certificate recovered from a crash", zap.String("path", r.Final))
	}
	for _, r := range rep.Removed {
		log.Info("incomplete certificate left by a crash removed", zap.String("path", r.Temp))
	}
	for _, r := range rep.Kept {
		log.Warn("certificate left by a crash kept beside a different one", zap.String("path", r.Temp), zap.Error(r.Err))
	}
}

// AuditHead returns Options.AuditHead for an audit log.
func AuditHead(l *audit.Async) func() *certs.AuditAnchor {
	return func() *certs.AuditAnchor {
		h, ok := l.Head()
		if !ok {
			return nil
		}
		return &certs.AuditAnchor{Seq: h.Seq, SHA256: h.SHA256}
	}
}
