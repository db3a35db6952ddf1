// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package heartbeat

// Internal limits, for the external tests.
const (
	QueueLen = queueLen
	MaxText  = maxText
)

// The parts of SupervisorDir, for the external tests.
var (
	SupervisorBase       = supervisorBase
	RemoveStaleRunDirsOf = removeStaleRunDirs
)
