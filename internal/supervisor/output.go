// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package supervisor

import (
	"io"
	"os"
	"sync"
	"unicode/utf8"
)

// tailSize is how much of each output stream is kept for last_output.
const tailSize = 64 << 10

// tail keeps the last tailSize bytes written to it.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(p) >= tailSize {
		t.buf = append(t.buf[:0], p[len(p)-tailSize:]...)
		return len(p), nil
	}
	if over := len(t.buf) + len(p) - tailSize; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	t.buf = append(t.buf, p...)
	return len(p), nil
}

// String returns the tail, starting at a rune boundary.
func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.buf
	for i := 0; i < utf8.UTFMax && len(b) > 0 && !utf8.RuneStart(b[0]); i++ {
		b = b[1:]
	}
	return string(b)
}

// stream is one of the agent's output streams, either handed over as is
// (a terminal: the agent gets our descriptor and nothing is kept) or
// passed through a pipe to sink while its tail is kept.
type stream struct {
	child *os.File // what the child gets
	read  *os.File // our end of the pipe, nil when direct
	sink  io.Writer
	tail  tail
	done  chan struct{}
}

// newStream sets up one stream: direct when direct != nil, else a pipe
// copied to sink (which may be nil to keep only the tail).
func newStream(direct *os.File, sink io.Writer) (*stream, error) {
	s := &stream{sink: sink, done: make(chan struct{})}
	if direct != nil {
		s.child = direct
		close(s.done)
		return s, nil
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	s.child, s.read = w, r
	return s, nil
}

// start begins copying; call once the child holds its end, after which
// our copy of the write end is closed so EOF comes when the tree is gone.
func (s *stream) start() {
	if s.read == nil {
		return
	}
	s.child.Close()
	go func() {
		defer close(s.done)
		defer s.read.Close()
		w := &sinkWriter{w: s.sink}
		buf := make([]byte, 2<<10) // per stream, per agent: keep it small
		for {
			n, err := s.read.Read(buf)
			if n > 0 {
				s.tail.Write(buf[:n])
				w.write(buf[:n])
			}
			if err != nil {
				return
			}
		}
	}()
}

// abort releases the pipe when the child never started.
func (s *stream) abort() {
	if s.read != nil {
		s.child.Close()
		s.read.Close()
		close(s.done)
	}
}

// captured reports whether a tail is being kept.
func (s *stream) captured() bool { return s.read != nil }

// sinkWriter forwards to w until w fails once; after that the output is
// only kept in the tail. The pipe is always drained, so an agent never
// blocks because our own stdout went away.
type sinkWriter struct {
	w      io.Writer
	failed bool
}

func (s *sinkWriter) write(p []byte) {
	if s.w == nil || s.failed {
		return
	}
	if _, err := s.w.Write(p); err != nil {
		s.failed = true
	}
}
