// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/hermeskill/hermeskilld/internal/control"
	"github.com/hermeskill/hermeskilld/internal/rotlog"
)

// A follower that has read everything waits for an inotify event on the
// log's directory: a write to the log, or its rotation (rotlog renames it
// to ID.log.1 and creates a new one). It also looks every logRecheck, in
// case an event was lost (inotify drops events when its queue overflows).
// Without inotify (the per-user limit of instances reached, say) it looks
// every logPoll instead.
const (
	logRecheck = time.Second
	logPoll    = 100 * time.Millisecond
)

// Logs is GET /v1/agents/{id}/logs: the agent's output as the daemon
// wrote it to state_dir/logs/ID.log (rotated by rotlog into ID.log.1,
// ID.log.2, …), from req.Tail lines before the end (negative: everything
// kept, oldest rotated file first). With req.Follow the reader then goes
// on with what is written, following the file across rotations, until
// ctx ends. An agent with no log yet has an empty one (a follower waits
// for it); an id that is neither an agent nor a log is ErrNotFound.
func (d *Daemon) Logs(ctx context.Context, id string, req control.LogsRequest) (io.ReadCloser, error) {
	if id == "" || id != filepath.Base(id) || strings.HasPrefix(id, ".") {
		return nil, fmt.Errorf("%w: agent id %q", control.ErrBadInput, id)
	}
	path := filepath.Join(d.logsDir, id+".log")
	d.mu.Lock()
	_, known := d.slots[id]
	d.mu.Unlock()
	if !known {
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Errorf("%w: %s (no agent and no log by that id)", control.ErrNotFound, id)
		}
	}
	return openLog(ctx, path, req)
}

// logReader reads the tail of a rotated log, then (following) the live
// file across rotations.
type logReader struct {
	ctx    context.Context
	path   string
	follow bool

	head  io.Reader  // what was there when it was opened, up to cur's offset
	older []*os.File // rotated files opened for head, closed at Close
	cur   *os.File   // the live file (nil: not created yet)
	// upto, without follow, ends the live file where it ended when the
	// request came: the agent keeps writing, and a tail of n lines must
	// not grow while it is read.
	upto io.Reader

	// wake has a value when the log's directory saw an event about path
	// since the follower last looked; nil without a watcher.
	wake    chan struct{}
	watcher *fsnotify.Watcher
	watched chan struct{} // closed when the goroutine reading watcher ends
	// recheck and poll are logRecheck and logPoll (tests lengthen them).
	recheck, poll time.Duration
}

// watch sets up the follower's watcher on path's directory, which sees
// writes to path, path created, and path renamed away. (A watch on the
// file itself would add nothing: it follows the inode, which a rotation
// renames away.) Without a watcher the follower polls.
func (lr *logReader) watch() {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return
	}
	if err := w.Add(filepath.Dir(lr.path)); err != nil {
		w.Close()
		return
	}
	lr.watcher, lr.wake, lr.watched = w, make(chan struct{}, 1), make(chan struct{})
	go func() {
		defer close(lr.watched)
		for {
			select {
			case ev, ok := <-w.Events:
				if !ok {
					return
				}
				if filepath.Clean(ev.Name) == lr.path {
					lr.signal()
				}
			case _, ok := <-w.Errors:
				if !ok {
					return
				}
				lr.signal() // an overflow, events lost: look again
			}
		}
	}()
}

func (lr *logReader) signal() {
	select {
	case lr.wake <- struct{}{}:
	default: // already signalled
	}
}

func openLog(ctx context.Context, path string, req control.LogsRequest) (*logReader, error) {
	lr := &logReader{ctx: ctx, path: filepath.Clean(path), follow: req.Follow, recheck: logRecheck, poll: logPoll}
	if req.Follow {
		// Before anything is read: what is written from here on is seen.
		lr.watch()
	}
	cur, err := os.Open(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		cur = nil
	case err != nil:
		lr.Close()
		return nil, err
	}
	lr.cur = cur
	var parts []io.Reader // newest first, reversed below
	want := req.Tail
	if cur != nil {
		fi, err := cur.Stat()
		if err != nil {
			lr.Close()
			return nil, err
		}
		off, lines, err := tailStart(cur, fi.Size(), want)
		if err != nil {
			lr.Close()
			return nil, err
		}
		if _, err := cur.Seek(off, io.SeekStart); err != nil {
			lr.Close()
			return nil, err
		}
		if !req.Follow {
			lr.upto = io.LimitReader(cur, fi.Size()-off)
		}
		if want >= 0 {
			want -= lines
		}
	}
	if want != 0 {
		for _, name := range rotatedLogs(path) {
			f, err := os.Open(name)
			if err != nil {
				continue // rotated away meanwhile
			}
			lr.older = append(lr.older, f)
			fi, err := f.Stat()
			if err != nil {
				continue
			}
			off, lines, err := tailStart(f, fi.Size(), want)
			if err != nil {
				continue
			}
			parts = append(parts, io.NewSectionReader(f, off, fi.Size()-off))
			if want > 0 {
				want -= lines
				if want <= 0 {
					break
				}
			}
		}
	}
	for i, j := 0, len(parts)-1; i < j; i, j = i+1, j-1 {
		parts[i], parts[j] = parts[j], parts[i]
	}
	lr.head = io.MultiReader(parts...)
	return lr, nil
}

// rotatedLogs are path's rotated files, newest (path.1) first.
func rotatedLogs(path string) []string {
	matches, _ := filepath.Glob(path + ".*")
	type numbered struct {
		n    int
		name string
	}
	var out []numbered
	for _, m := range matches {
		n, err := strconv.Atoi(strings.TrimPrefix(m, path+"."))
		if err == nil && n >= 1 && rotlog.Name(path, n) == m {
			out = append(out, numbered{n, m})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].n < out[j].n })
	names := make([]string, len(out))
	for i, o := range out {
		names[i] = o.name
	}
	return names
}

// tailStart is the offset where the last n lines of a file of size bytes
// begin, and how many lines it holds from there (fewer than n when the
// whole file has fewer: then the offset is 0). A last line without its
// newline counts. n < 0 means the whole file.
func tailStart(f io.ReaderAt, size int64, n int) (int64, int, error) {
	if size == 0 {
		return 0, 0, nil
	}
	if n < 0 {
		return 0, 0, nil
	}
	if n == 0 {
		return size, 0, nil
	}
	buf := make([]byte, 32<<10)
	found := 0 // newlines before the last line's end
	for pos := size; pos > 0; {
		k := min(int64(len(buf)), pos)
		pos -= k
		if _, err := f.ReadAt(buf[:k], pos); err != nil && !errors.Is(err, io.EOF) {
			return 0, 0, err
		}
		for i := k - 1; i >= 0; i-- {
			if buf[i] != '\n' || pos+i == size-1 {
				continue
			}
			found++
			if found == n {
				return pos + i + 1, n, nil
			}
		}
	}
	return 0, found + 1, nil
}

// Read implements io.Reader: the head, then the live file; following, it
// waits for more (an event on the log, or a recheck) until ctx ends, then
// io.EOF.
func (lr *logReader) Read(p []byte) (int, error) {
	for {
		if lr.head != nil {
			n, err := lr.head.Read(p)
			if n > 0 {
				return n, nil
			}
			if err != nil && !errors.Is(err, io.EOF) {
				return 0, err
			}
			lr.head = nil
			for _, f := range lr.older {
				f.Close()
			}
			lr.older = nil
		}
		if lr.cur != nil {
			var r io.Reader = lr.cur
			if lr.upto != nil {
				r = lr.upto
			}
			n, err := r.Read(p)
			if n > 0 {
				return n, nil
			}
			if err != nil && !errors.Is(err, io.EOF) {
				return 0, err
			}
		}
		if !lr.follow || lr.ctx.Err() != nil {
			return 0, io.EOF
		}
		if lr.switchFile() {
			continue
		}
		if lr.wait() {
			return 0, io.EOF
		}
	}
}

// wait waits for an event on the log, or for the next recheck; it reports
// whether ctx ended.
func (lr *logReader) wait() bool {
	every := lr.poll
	if lr.wake != nil {
		every = lr.recheck
	}
	t := time.NewTimer(every)
	defer t.Stop()
	select {
	case <-lr.ctx.Done():
		return true
	case <-lr.wake: // nil without a watcher: never
	case <-t.C:
	}
	return false
}

// switchFile, at the end of cur, moves on when cur was rotated away: what
// was written to it after the last read, the files rotated after it
// (when more than one rotation happened since the last look), then the
// live file. It reports whether there is something new to read.
//
// rotlog may be rotating while it looks. The live file is opened first
// and is the one moved to once the rest is read (a rotation after that is
// found at the next look). The rotated files are taken only from a walk
// during which no rotation happened (their names named the same files
// before and after it), so that their order is their names' order; a
// look that finds rotlog rotating each time it walks is left to the next
// one, which an event or the recheck brings.
func (lr *logReader) switchFile() bool {
	live, err := os.Open(lr.path)
	if err != nil {
		return false // rotated, the new one not created yet (or never created)
	}
	if lr.cur == nil {
		lr.cur = live
		return true
	}
	lfi, err := live.Stat()
	if err != nil {
		live.Close()
		return false
	}
	for range 3 {
		fi, err := lr.cur.Stat()
		if err != nil || os.SameFile(fi, lfi) {
			break
		}
		before := rotatedFiles(lr.path)
		between := rotatedSince(lr.path, fi, lfi)
		if !slices.EqualFunc(before, rotatedFiles(lr.path), os.SameFile) {
			for _, f := range between {
				f.Close()
			}
			continue
		}
		// cur is path.k (or gone, past keep): the rest of cur, then
		// path.k-1 … path.1 whole, then the live file.
		rs := []io.Reader{lr.cur}
		for _, f := range between {
			rs = append(rs, f)
		}
		lr.head = io.MultiReader(rs...)
		lr.older = append(between, lr.cur)
		lr.cur = live
		return true
	}
	live.Close()
	return false
}

// rotatedFiles describes the rotated files of path, newest first.
func rotatedFiles(path string) []os.FileInfo {
	var out []os.FileInfo
	for _, name := range rotatedLogs(path) {
		if fi, err := os.Stat(name); err == nil {
			out = append(out, fi)
		}
	}
	return out
}

// rotatedSince opens the rotated files of path older than live and newer
// than cur (all of them when cur is not among them: it went past keep),
// oldest first. live is among them when rotlog rotated it after it was
// opened: what is newer than it is read after it, at a later look.
func rotatedSince(path string, cur, live os.FileInfo) []*os.File {
	var files []*os.File
	for _, name := range rotatedLogs(path) {
		f, err := os.Open(name)
		if err != nil {
			continue
		}
		fi, err := f.Stat()
		switch {
		case err != nil:
			f.Close()
			continue
		case os.SameFile(fi, cur):
			f.Close()
			return files
		case os.SameFile(fi, live):
			f.Close()
			for _, newer := range files {
				newer.Close()
			}
			files = nil
			continue
		}
		files = append([]*os.File{f}, files...)
	}
	return files
}

// Close closes the files and the watcher, and waits for the goroutine
// reading the watcher to end.
func (lr *logReader) Close() error {
	if lr.watcher != nil {
		lr.watcher.Close()
		<-lr.watched
		lr.watcher = nil
	}
	for _, f := range lr.older {
		f.Close()
	}
	lr.older = nil
	if lr.cur != nil {
		lr.cur.Close()
		lr.cur = nil
	}
	return nil
}
