// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package atomicfile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"syscall"
	"testing"
)

// The test binary doubles as a helper process, as os/exec's tests do: with
// helperEnv set, TestMain runs the named helper instead of the tests. The
// helpers exist for what one process cannot do to itself without disturbing
// the other tests: run as another user, or under a file size limit.
const helperEnv = "HERMESKILL_ATOMICFILE_HELPER"

// helperResult is what a helper prints, as JSON, on stdout.
type helperResult struct {
	Euid       int
	StatErr    string // stat of the target directory: proves it is searchable
	Err        string
	Op         string // Op of the *fs.PathError, if it is one
	Permission bool   // errors.Is(err, fs.ErrPermission)
	EFBIG      bool
}

var helpers = map[string]func() helperResult{
	// write: WriteFile(HK_PATH, HK_SIZE bytes, 0640), optionally under
	// RLIMIT_FSIZE = HK_FSIZE bytes (Go ignores SIGXFSZ, so write gets EFBIG).
	"write": func() helperResult {
		path := os.Getenv("HK_PATH")
		size, _ := strconv.Atoi(os.Getenv("HK_SIZE"))
		r := helperResult{Euid: os.Geteuid()}
		if s := os.Getenv("HK_FSIZE"); s != "" {
			n, _ := strconv.ParseUint(s, 10, 64)
			lim := syscall.Rlimit{Cur: n, Max: n}
			if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
				r.Err = "setrlimit: " + err.Error()
				return r
			}
		}
		if _, err := os.Stat(os.Getenv("HK_DIR")); err != nil {
			r.StatErr = err.Error()
		}
		err := WriteFile(path, bytes.Repeat([]byte{'x'}, size), 0o640)
		if err != nil {
			r.Err = err.Error()
			var pe *fs.PathError
			if errors.As(err, &pe) {
				r.Op = pe.Op
			}
			r.Permission = errors.Is(err, fs.ErrPermission)
			r.EFBIG = errors.Is(err, syscall.EFBIG)
		}
		return r
	},
}

func TestMain(m *testing.M) {
	if name := os.Getenv(helperEnv); name != "" {
		h, ok := helpers[name]
		if !ok {
			fmt.Fprintf(os.Stderr, "unknown helper %q\n", name)
			os.Exit(2)
		}
		if err := json.NewEncoder(os.Stdout).Encode(h()); err != nil {
			os.Exit(3)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}
