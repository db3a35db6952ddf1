// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package procfs

import (
	"os"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// DefaultRoot is where Linux mounts the proc filesystem.
const DefaultRoot = "/proc"

// FS reads a proc filesystem mounted at Root. The zero value is not useful;
// use Default, or set Root to a fake tree in tests. FS holds no state, so it
// is safe for concurrent use and cheap to copy.
type FS struct {
	Root string
}

// Default returns an FS for the system's /proc.
func Default() FS { return FS{Root: DefaultRoot} }

// path returns Root/PID/name.
func (fs FS) path(pid int, name string) string {
	var a [64]byte
	b := append(a[:0], fs.Root...)
	b = append(b, '/')
	b = strconv.AppendInt(b, int64(pid), 10)
	if name != "" {
		b = append(b, '/')
		b = append(b, name...)
	}
	return string(b)
}

const (
	// bufSize holds any stat or status file with room to spare: stat is
	// 52 numbers and a comm of at most 64 bytes, status about 1.5 KiB.
	bufSize = 4 << 10
	// maxPooled keeps the occasional large read (environ, cmdline) from
	// pinning memory in the pool.
	maxPooled = 64 << 10
)

// bufPool holds read buffers, so that sampling a tree every second does not
// allocate one per file.
var bufPool = sync.Pool{New: func() any {
	b := make([]byte, bufSize)
	return &b
}}

func getBuf() *[]byte { return bufPool.Get().(*[]byte) }

func putBuf(b *[]byte) {
	if cap(*b) > maxPooled {
		return
	}
	*b = (*b)[:cap(*b)]
	bufPool.Put(b)
}

// readFile reads the file at path into *buf, growing it when needed, and
// returns the bytes read (a slice of *buf), reading at most limit bytes when
// limit > 0. It is one open, usually one read, and one close.
//
// A short read is taken as the end of the file: the proc files read here
// are seq_file or page-at-a-time files that return all they have in one
// read(2) when the buffer is big enough, and so do regular files (the
// fixtures), which saves the second read(2) that would return 0.
func readFile(path string, buf *[]byte, limit int) ([]byte, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, os.NewSyscallError("open", err)
	}
	defer unix.Close(fd)

	b := (*buf)[:cap(*buf)]
	n := 0
	for {
		if limit > 0 && n >= limit {
			break
		}
		if n == len(b) {
			grown := make([]byte, 2*len(b))
			copy(grown, b)
			clear(b) // the old array may hold an environ
			b = grown
			*buf = b
		}
		end := len(b)
		if limit > 0 && end > limit {
			end = limit
		}
		m, err := unix.Read(fd, b[n:end])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, os.NewSyscallError("read", err)
		}
		n += m
		if m == 0 || n < end {
			break
		}
	}
	return b[:n], nil
}
