// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"time"

	"github.com/hermeskill/hermeskilld/internal/config"
)

// pflag values parsed by the same functions as the config files, so a
// flag and a YAML key accept exactly the same forms.

type durationValue struct{ d *time.Duration }

func (v durationValue) String() string {
	if v.d == nil || *v.d == 0 {
		return "0"
	}
	return config.FormatDuration(*v.d)
}
func (v durationValue) Set(s string) error {
	d, err := config.ParseDuration(s)
	if err == nil {
		*v.d = d
	}
	return err
}
func (durationValue) Type() string { return "duration" }
