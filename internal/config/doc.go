// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

// Package config owns hermeskilld's configuration: it parses, validates and
// defaults the daemon file (hermeskilld.yaml, see LoadDaemon) and agent files
// (one per agent in agents_dir, and the file given to `supervise --config`,
// see LoadAgent), and it is the one place where durations, sizes and signals
// are parsed (ParseDuration, ParseSize, ParseSignal). Other packages get
// typed values and never see YAML.
//
// The schema is declared once, by the struct tags of Agent and Daemon (see
// schema.go). Its reference for people, every key with its default, the
// syntax and the merging rules, is docs/configuration.md at the root of the
// repository; doc_test.go holds the two to each other.
//
// # Using it
//
// The daemon:
//
//	d, err := config.LoadDaemon(path)             // validated, defaults filled
//	a, err := config.LoadAgent(file, &d.Defaults) // for each file in d.AgentsDir
//	a.Normalize()
//	err = a.Validate(true)                        // id and command required
//
// supervise:
//
//	a := config.DefaultAgent()                    // without --config, or
//	a, err := config.LoadAgent(file, nil)         // with --config FILE
//	err = a.Set("checks.memory.kill", "2GiB")     // for each flag given: flags win, key by key
//	a.ID, a.Command = id, argv
//	a.Normalize()
//	err = a.Validate(true)
//
// Normalize must run after the flags, because some defaults derive from
// other values (startup_timeout from heartbeat_timeout).
//
// The daemon's status shows an agent's checks with Checks.Describe and
// Escalation.Describe. Every error is an *Error with the file, line and key
// and a Kind to match (ErrUnknownKey, ErrBadValue, …), joined when there
// are several.
package config
