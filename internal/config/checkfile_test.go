// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package config

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// A file is what its keys say it is: a daemon file, or an agent file when
// the daemon schema refuses a top-level key of an agent file (or with
// forceAgent); either is checked against this host.
func TestCheckFile(t *testing.T) {
	dir := t.TempDir()
	agents := mkdir(t, filepath.Join(dir, "agents.d"), 0o755)
	file := func(name, content string) string {
		return writeFile(t, filepath.Join(dir, name), content, 0o644)
	}

	daemon := file("hk.yaml", "agents_dir: "+agents+"\n")
	kind, note, err := CheckFile(daemon, false)
	require.NoError(t, err)
	require.Equal(t, "daemon", kind)
	require.Empty(t, note)

	agent := file("bot.yaml", "id: bot\ncommand: [/bin/true]\n")
	kind, note, err = CheckFile(agent, false)
	require.NoError(t, err)
	require.Equal(t, "agent", kind)
	require.Empty(t, note)

	// Keys of neither schema: the daemon schema's error.
	typo := file("typo.yaml", "agents_dri: "+agents+"\n")
	_, _, err = CheckFile(typo, false)
	require.ErrorIs(t, err, ErrUnknownKey)
	require.ErrorContains(t, err, typo+`:1: unknown key "agents_dri" (known: state_dir,`)

	// Forced, a file without agent keys is an agent file, and invalid.
	_, _, err = CheckFile(daemon, true)
	require.ErrorIs(t, err, ErrUnknownKey)
	require.ErrorContains(t, err, daemon+`:1: unknown key "agents_dir"`)

	// An agent file is validated (id and command required) and checked
	// against this host.
	noID := file("noid.yaml", "command: [/bin/true]\n")
	_, _, err = CheckFile(noID, false)
	require.EqualError(t, err, noID+": id: required")
	missing := filepath.Join(dir, "no-such-agent")
	bad := file("bad.yaml", "id: bad\ncommand: ["+missing+"]\n")
	_, _, err = CheckFile(bad, false)
	require.ErrorIs(t, err, ErrHost)
	require.ErrorContains(t, err, bad+":2: command: "+missing+": ")
	require.ErrorContains(t, err, "cannot execute it: it does not exist")

	// The sections only supervise takes: valid, with a note.
	gw := file("gw.yaml", "id: gw\ncommand: [/bin/true]\ngateway: {upstreams: [openai]}\n")
	kind, note, err = CheckFile(gw, false)
	require.NoError(t, err)
	require.Equal(t, "agent", kind)
	require.Equal(t, " for supervise --config (gateway: the daemon refuses an agent file that sets it; its own file's section serves every agent)", note)

	// A daemon file the host cannot honour.
	_, _, err = CheckFile(file("group.yaml", "agents_dir: "+agents+"\ncontrol: {read_group: "+noSuchGroup+"}\n"), false)
	require.ErrorIs(t, err, ErrHost)
	require.ErrorContains(t, err, `:2: control.read_group: no group "`+noSuchGroup+`" on this host`)
}
