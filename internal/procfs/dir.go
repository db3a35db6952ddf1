// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package procfs

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// direntHeader is the size of struct linux_dirent64 before d_name: d_ino
// (8), d_off (8), d_reclen (2), d_type (1). See getdents64(2).
const direntHeader = 19

// readDirNames calls fn with the name of every entry of the directory at
// path except "." and "..", in the order of the directory, without stat-ing
// or sorting them. A name is valid only during its call. It reads with
// getdents64(2) into a pooled buffer, so listing allocates nothing.
func readDirNames(path string, fn func(name []byte)) error {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return os.NewSyscallError("open", err)
	}
	defer unix.Close(fd)

	buf := getBuf()
	defer putBuf(buf)
	for {
		n, err := unix.Getdents(fd, *buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return os.NewSyscallError("getdents64", err)
		}
		if n <= 0 {
			return nil
		}
		b := (*buf)[:n]
		for len(b) > 0 {
			if len(b) < direntHeader {
				return fmt.Errorf("getdents64: %w: short record", ErrMalformed)
			}
			reclen := int(binary.NativeEndian.Uint16(b[16:18]))
			if reclen < direntHeader || reclen > len(b) {
				return fmt.Errorf("getdents64: %w: record length %d", ErrMalformed, reclen)
			}
			name := b[direntHeader:reclen]
			if i := bytes.IndexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			b = b[reclen:]
			if string(name) == "." || string(name) == ".." {
				continue
			}
			fn(name)
		}
	}
}
