// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package certs

import (
	"path/filepath"
	"strings"
)

// Match is how an operator's ref names one of a list of certificates, the
// one rule of `hermeskilld certs` (offline or through the daemon) and of
// the daemon's GET /v1/certs/{id}: the certificate whose cert_id is ref;
// else the only one whose file name (FileName: time, agent id, cert id)
// contains ref, so that a unique part of the id will do. key gives an
// item's cert_id and file path.
//
// It returns the index of the certificate named and how many matched: 1
// when ref names one, 0 when none, more when ref is a part of several
// file names and no cert_id equals it (i is then meaningless). An empty
// ref names nothing.
func Match[T any](ref string, items []T, key func(T) (certID, path string)) (i, n int) {
	if ref == "" {
		return 0, 0
	}
	first := -1
	for j, it := range items {
		id, path := key(it)
		if id == ref {
			return j, 1
		}
		if strings.Contains(filepath.Base(path), ref) {
			if first < 0 {
				first = j
			}
			n++
		}
	}
	if n == 1 {
		return first, 1
	}
	return 0, n
}
