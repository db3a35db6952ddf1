// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package procsup

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/hermeskill/hermeskilld/internal/execstage"
	"github.com/hermeskill/hermeskilld/internal/landlock"
)

// stageWait bounds the exec stage, from fork to the agent's execve(2):
// milliseconds, unless the host is thrashing.
const stageWait = 30 * time.Second

// ConfineError: the agent could not be confined as asked (Spec.Landlock),
// and was never run. Err is the failed call's error (a syscall.Errno
// inside when there is one), landlock.ErrUnsupported or
// execstage.ErrTimeout.
type ConfineError struct{ Err error }

func (e *ConfineError) Error() string { return "confine the agent: " + e.Err.Error() }
func (e *ConfineError) Unwrap() error { return e.Err }

// confined prepares the exec stage for r: the executable, argv and the
// pipe whose write end is the stage's descriptor 3.
func (rt *Runtime) confined(r landlock.Ruleset, path string, argv []string) (exe string, stageArgv []string, rd, wr *os.File, err error) {
	if need := r.Needs(); rt.landlockABI < need {
		return "", nil, nil, nil, &ConfineError{fmt.Errorf("Landlock ABI %d, needs %d: %w", rt.landlockABI, need, landlock.ErrUnsupported)}
	}
	if rd, wr, err = os.Pipe(); err != nil {
		return "", nil, nil, nil, &ConfineError{err}
	}
	return execstage.Exe, execstage.Argv(r, rt.landlockABI, path, argv), rd, wr, nil
}

// stageResult is what the stage reported: nil once the agent was
// executed, a *StartError for an agent that could not be (126, 127 as
// without the stage), a *ConfineError otherwise.
func stageResult(rd *os.File, argv0, path string) error {
	err := execstage.Result(rd, stageWait)
	var f *execstage.Failure
	if errors.As(err, &f) && f.Exec {
		return startError(argv0, &os.PathError{Op: "fork/exec", Path: path, Err: f.Errno})
	}
	if err != nil {
		return &ConfineError{err}
	}
	return nil
}
