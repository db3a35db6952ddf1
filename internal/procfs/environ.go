// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package procfs

import (
	"bytes"
	"errors"
	"strings"

	"golang.org/x/sys/unix"
)

// EnvironValue returns the value of one variable in the initial environment
// of the process, /proc/PID/environ: the environment it was exec'd with,
// not changes it made since. It is meant to attribute an orphan to the agent
// that started it, by a marker variable; environments hold secrets, so
// nothing else of it is returned or kept, and the read buffer is cleared.
//
// It returns false when the variable is not set, and for a zombie or kernel
// thread, whose environ is empty. When it is set twice the first value wins,
// as with getenv(3). The error wraps ErrNoProcess when the process does not
// exist, and [io/fs.ErrPermission] when the caller may not ptrace it.
func (fs FS) EnvironValue(pid int, key string) (string, bool, error) {
	buf := getBuf()
	defer func() {
		clear(*buf)
		putBuf(buf)
	}()
	data, err := readFile(fs.path(pid, "environ"), buf, 0)
	if err != nil {
		// Reading environ needs the process's memory map. Zombies and
		// kernel threads have none, and open fails with ESRCH although
		// the process exists; tell that from a process that is gone.
		if errors.Is(err, unix.ESRCH) {
			if _, serr := fs.stat(pid, false); serr == nil {
				return "", false, nil
			}
		}
		return "", false, wrapErr("environ", pid, err)
	}
	v, ok := environValue(data, key)
	return v, ok, nil
}

// environValue finds key in NUL-separated KEY=VALUE entries.
func environValue(data []byte, key string) (string, bool) {
	if key == "" || strings.IndexByte(key, '=') >= 0 {
		return "", false
	}
	for len(data) > 0 {
		var entry []byte
		if i := bytes.IndexByte(data, 0); i >= 0 {
			entry, data = data[:i], data[i+1:]
		} else {
			entry, data = data, nil
		}
		if len(entry) > len(key) && entry[len(key)] == '=' && string(entry[:len(key)]) == key {
			return string(entry[len(key)+1:]), true
		}
	}
	return "", false
}
