package daemon

import "errors"

// Errors that keep the daemon from starting; matchable with errors.Is.
var (
	// ErrNoAgentsDir: agents_dir names a directory that does not exist,
	// and not the default one (which the daemon creates). A mistyped path
	// would otherwise give a daemon that watches an empty directory and
	// runs none of the agents the operator declared.
	ErrNoAgentsDir = errors.New("agents_dir does not exist")
)
