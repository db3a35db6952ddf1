// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

// Command launchfloor is the launch floor of hermeskilld's binary: what
// `hermeskilld supervise -- CMD` would cost if supervise itself did
// nothing. make bench-compare times it next to supervise and tini.
//
// It imports every package cmd/hermeskilld imports, so the same package
// initialisation runs on its start (a test keeps the lists equal), and
// its main does only what supervise cannot do without: it starts a copy
// of itself, as supervise starts its keeper (an exec and a second runtime
// start, which here exits at once instead of waiting on a pipe), then
// forks and execs CMD, waits for it and exits with its status.
//
// The linker drops the code nothing here calls, so this binary is
// smaller than hermeskilld and its start a little cheaper: a floor below
// the real one, never above it.
package main

import (
	"os"
	"syscall"

	_ "bytes"
	_ "context"
	_ "crypto/ed25519"
	_ "encoding/json"
	_ "errors"
	_ "fmt"
	_ "io"
	_ "io/fs"
	_ "maps"
	_ "math"
	_ "os/exec"
	_ "os/signal"
	_ "path/filepath"
	_ "regexp"
	_ "runtime/debug"
	_ "slices"
	_ "strconv"
	_ "strings"
	_ "sync"
	_ "text/tabwriter"
	_ "time"

	_ "github.com/spf13/cobra"
	_ "github.com/spf13/pflag"
	_ "go.uber.org/zap"
	_ "go.uber.org/zap/zapcore"
	_ "golang.org/x/sys/unix"

	_ "github.com/hermeskill/hermeskilld/internal/audit"
	_ "github.com/hermeskill/hermeskilld/internal/calibrate"
	_ "github.com/hermeskill/hermeskilld/internal/certs"
	_ "github.com/hermeskill/hermeskilld/internal/config"
	_ "github.com/hermeskill/hermeskilld/internal/control"
	_ "github.com/hermeskill/hermeskilld/internal/daemon"
	_ "github.com/hermeskill/hermeskilld/internal/display"
	_ "github.com/hermeskill/hermeskilld/internal/escalate"
	_ "github.com/hermeskill/hermeskilld/internal/gateway"
	_ "github.com/hermeskill/hermeskilld/internal/heartbeat"
	_ "github.com/hermeskill/hermeskilld/internal/host"
	_ "github.com/hermeskill/hermeskilld/internal/keeper"
	_ "github.com/hermeskill/hermeskilld/internal/labels"
	_ "github.com/hermeskill/hermeskilld/internal/metrics"
	_ "github.com/hermeskill/hermeskilld/internal/outbox"
	_ "github.com/hermeskill/hermeskilld/internal/procsup"
	_ "github.com/hermeskill/hermeskilld/internal/recorder"
	_ "github.com/hermeskill/hermeskilld/internal/supervisor"
	_ "github.com/hermeskill/hermeskilld/internal/symptoms"
	_ "github.com/hermeskill/hermeskilld/internal/telemetry"
	_ "github.com/hermeskill/hermeskilld/internal/tty"
)

func main() {
	if len(os.Args) < 2 {
		os.Exit(2)
	}
	if os.Args[1] == "-keeper" {
		return
	}
	// Our environment, as supervise's keeper gets it.
	keeper, err := os.StartProcess("/proc/self/exe", []string{os.Args[0], "-keeper"}, &os.ProcAttr{})
	if err != nil {
		os.Exit(125)
	}
	_ = keeper.Release() // not waited for, as supervise does not wait for its keeper
	var ws syscall.WaitStatus
	pid, err := syscall.ForkExec(os.Args[1], os.Args[1:], &syscall.ProcAttr{Env: os.Environ(), Files: []uintptr{0, 1, 2}})
	if err != nil {
		os.Exit(127)
	}
	for {
		if _, err = syscall.Wait4(pid, &ws, 0, nil); err != syscall.EINTR {
			break
		}
	}
	os.Exit(ws.ExitStatus())
}
