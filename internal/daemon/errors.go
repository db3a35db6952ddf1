// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"errors"

	"github.com/hermeskill/hermeskilld/internal/config"
)

// Errors that keep the daemon from starting; matchable with errors.Is.
var (
	// ErrNoAgentsDir: agents_dir names a directory that does not exist,
	// and not the default one (which the daemon creates). A mistyped path
	// would otherwise give a daemon that watches an empty directory and
	// runs none of the agents the operator declared.
	ErrNoAgentsDir = config.ErrNoAgentsDir
	// ErrCorruptHeld: state_dir/held.json is not what the daemon writes
	// (bad JSON, unknown keys, trailing data). Starting without it would
	// forget a quarantine or an e-stop, so the daemon does not start.
	ErrCorruptHeld = errors.New("corrupt")
)
