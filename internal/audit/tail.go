// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package audit

import (
	"bytes"
	"fmt"
	"io"
)

// tail is where a file's chain ends.
type tail struct {
	end  int64 // just past the "\n" of the last good line; bytes from here on are torn
	last []byte
	link link // of last; zero when last is nil
}

// scanTail finds the last good line of the first size bytes of r. A torn tail is what a
// writer that died inside write(2) leaves: bytes after the last "\n", and before them at most
// one complete line that is not an audit record. scanTail reads the file backwards, so it
// costs the length of the last lines, not of the file. It returns errCorruptTail when the line
// before a bad last line is bad too.
func scanTail(r io.ReaderAt, size int64) (tail, error) {
	end, _, err := lastSegment(r, size) // the unterminated segment, if any, is torn
	if err != nil {
		return tail{}, err
	}
	for bad := 0; end > 0; bad++ {
		start, line, err := lastSegment(r, end-1)
		if err != nil {
			return tail{}, err
		}
		l, err := decodeLink(line)
		if err == nil {
			return tail{end: end, last: line, link: l}, nil
		}
		if bad == 1 {
			return tail{}, fmt.Errorf("line at offset %d: %w (%w)", start, errCorruptTail, err)
		}
		end = start
	}
	return tail{}, nil
}

// lastSegment returns the bytes of r between the last "\n" before end and end, and where they
// start.
func lastSegment(r io.ReaderAt, end int64) (int64, []byte, error) {
	const chunk = 4096
	var seg []byte // r[pos:end]
	for pos := end; pos > 0; {
		n := min(pos, chunk)
		buf := make([]byte, n, int(n)+len(seg))
		if _, err := r.ReadAt(buf, pos-n); err != nil {
			return 0, nil, fmt.Errorf("read audit log tail: %w", err)
		}
		pos -= n
		if i := bytes.LastIndexByte(buf, '\n'); i >= 0 {
			return pos + int64(i) + 1, append(buf[i+1:], seg...), nil
		}
		seg = append(buf, seg...)
	}
	return 0, seg, nil
}
