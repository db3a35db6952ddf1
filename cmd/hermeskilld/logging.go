// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// logFlags are the logging flags every long-running command has.
type logFlags struct {
	format string
	level  string
}

// newLogger builds a logger to stderr: a console encoder for a person, JSON
// for machines (journald, log shippers).
func (f logFlags) newLogger() (*zap.Logger, error) {
	lvl, err := zapcore.ParseLevel(f.level)
	if err != nil {
		return nil, usageError("--log-level: %v", err)
	}
	var enc zapcore.Encoder
	switch f.format {
	case "console", "":
		cfg := zap.NewDevelopmentEncoderConfig()
		cfg.EncodeTime = zapcore.TimeEncoderOfLayout("15:04:05.000")
		cfg.EncodeCaller = nil
		cfg.NameKey = ""
		cfg.ConsoleSeparator = "  "
		enc = zapcore.NewConsoleEncoder(cfg)
	case "json":
		cfg := zap.NewProductionEncoderConfig()
		cfg.EncodeTime = zapcore.RFC3339NanoTimeEncoder
		enc = zapcore.NewJSONEncoder(cfg)
	default:
		return nil, usageError("--log-format must be console or json, not %q", f.format)
	}
	core := zapcore.NewCore(enc, zapcore.Lock(unsynced{os.Stderr}), lvl)
	return zap.New(core).Named("hermeskilld"), nil
}

// unsynced is stderr without Sync: each entry is written unbuffered, so
// there is nothing to flush, and zap's Sync would fsync(2) a stderr that
// is redirected to a file, about a millisecond added to every exit.
type unsynced struct{ *os.File }

func (unsynced) Sync() error { return nil }
