// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package cgroup

import (
	"os"
	"path/filepath"
)

// Reading and writing cgroupfs interface files.

// readEvents reads cgroup.events, a flat keyed file with "populated" and
// "frozen" (cgroup-v2.rst "Core Interface Files").
func readEvents(dir string) (map[string]uint64, error) {
	data, err := os.ReadFile(filepath.Join(dir, "cgroup.events"))
	if err != nil {
		return nil, err
	}
	return parseFlatKeyed(data)
}

// writeFile writes s to an existing cgroupfs file in one write(2). No
// O_CREAT: a missing interface file means the kernel lacks the feature.
func writeFile(name, s string) error {
	f, err := os.OpenFile(name, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(s)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
