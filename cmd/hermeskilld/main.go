// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

// Command hermeskilld is the out-of-process kill switch for AI agents: it
// supervises agents as child processes, kills the ones that wedge, loop or
// overspend through an escalation ladder, and writes a death certificate
// for every kill. See `hermeskilld --help`.
package main

import (
	"os"

	"github.com/hermeskill/hermeskilld/internal/keeper"
)

func main() {
	keeper.Main() // when started as hermeskilld's keeper, runs it and exits
	os.Exit(run(os.Args[1:]))
}
