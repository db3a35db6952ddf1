// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

// Package packaging tests hermeskilld as it ships: the Debian package that
// make deb builds, installed into this machine (TestDebInstall), and the
// static binary as a container's entrypoint in a root that holds nothing
// else (TestEmptyRoot). Beside them are the package's own files: nfpm.yaml,
// the maintainer scripts, the sysusers.d and tmpfiles.d entries.
package packaging

import (
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// repoRoot is the repository's root, the parent of this directory.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("..")
	require.NoError(t, err)
	return dir
}

// lookPath finds tool or skips the test, naming the tool and what
// provides it.
func lookPath(t *testing.T, tool, from string) string {
	t.Helper()
	p, err := exec.LookPath(tool)
	if err != nil {
		t.Skipf("needs %s (%s): not found", tool, from)
	}
	return p
}

// outcome is one finished command.
type outcome struct {
	code           int
	stdout, stderr string
}

// run runs argv in dir with env (nil: ours) and waits for it, at most
// limit: a command still running then is killed and fails the test, as
// does one that could not start. Its exit status is the caller's to judge.
func run(t *testing.T, limit time.Duration, dir string, env []string, argv ...string) outcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = dir, env
	// A helper that inherited our pipes (hermeskilld's keeper) must not
	// hold Wait past the command's own exit for long.
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	o := outcome{code: cmd.ProcessState.ExitCode(), stdout: stdout.String(), stderr: stderr.String()}
	t.Logf("$ %s\n-> exit %d\n%s%s", strings.Join(argv, " "), o.code, o.stdout, o.stderr)
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("%s: %v", argv[0], err)
	}
	require.NoError(t, ctx.Err(), "%s did not finish within %s", argv[0], limit)
	return o
}

// staticBuild builds the package at pkg (relative to the repository) with
// cgo off into out, and checks that the result is a static executable.
func staticBuild(t *testing.T, pkg, out string) {
	t.Helper()
	goTool := lookPath(t, "go", "the Go toolchain")
	env := append(os.Environ(), "CGO_ENABLED=0")
	o := run(t, 5*time.Minute, repoRoot(t), env, goTool, "build", "-trimpath", "-o", out, "./"+pkg)
	require.Zero(t, o.code, "go build %s", pkg)
	requireStatic(t, out)
}

// requireStatic: no program interpreter (the dynamic loader) and no
// shared library needed.
func requireStatic(t *testing.T, path string) {
	t.Helper()
	f, err := elf.Open(path)
	require.NoError(t, err)
	defer f.Close()
	for _, p := range f.Progs {
		require.NotEqual(t, elf.PT_INTERP, p.Type, "%s asks for a dynamic loader", path)
	}
	libs, err := f.ImportedLibraries()
	require.NoError(t, err)
	require.Empty(t, libs, "%s needs shared libraries", path)
}
