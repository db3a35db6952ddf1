// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

// Package runjournal keeps a durable record of every agent run while it
// runs, so that a death hermeskilld could not record — hermeskilld itself
// SIGKILLed, the host's OOM killer taking it — still gets a certificate.
//
// At a run's start hermeskilld writes an Entry (what the certificate of
// its death would say, as far as known then; updated as the run goes on)
// into the journal directory, and removes it once the run's end is
// recorded. The keeper, which kills the agents when hermeskilld dies,
// writes a Killed record of what it killed and when into the same
// directory. The next hermeskilld start on that directory finds the
// entries whose owner is dead and writes each one's certificate
// (Recover).
//
// Files: AGENT.PID.START.run (an Entry; PID and START are the agent's
// main process's) and killed.OWNER.NANOS.json (a Killed), both JSON,
// mode 0600, written atomically (a Killed also durably; see Write). An Entry's "certificate" is
// a certificate in the schema of internal/certs: where no hermeskilld
// ever starts again, `jq .certificate FILE` is the record.
package runjournal

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hermeskill/hermeskilld/internal/atomicfile"
	"github.com/hermeskill/hermeskilld/internal/certs"
	"github.com/hermeskill/hermeskilld/internal/procfs"
)

// Owner is a hermeskilld process: its pid and start time (proc(5) stat
// field 22), which together name it for ever.
type Owner struct {
	PID   int    `json:"pid"`
	Start uint64 `json:"start_ticks"`
}

// Self is this process as an Owner.
func Self() Owner {
	o := Owner{PID: os.Getpid()}
	if st, err := procfs.Default().Stat(o.PID); err == nil {
		o.Start = st.StartTimeTicks
	}
	return o
}

// alive reports whether o still runs (a recycled pid is not o).
func (o Owner) alive(fsys procfs.FS) bool {
	st, err := fsys.Stat(o.PID)
	return err == nil && st.StartTimeTicks == o.Start && st.State != 'Z'
}

// Entry is the record of one running agent.
type Entry struct {
	// Owner is the hermeskilld that supervises the run.
	Owner Owner `json:"owner"`
	// MainStart is the main process's start time (with the certificate's
	// pid, its identity).
	MainStart uint64 `json:"main_start_ticks"`
	// Marker is KEY=VALUE in the environment of every process of the run
	// (process-group containment); Cgroup the base name of its cgroup.
	Marker string `json:"marker,omitempty"`
	Cgroup string `json:"cgroup,omitempty"`
	// CertsDir is where its certificate goes.
	CertsDir string `json:"certs_dir"`
	// UpdatedAt is when the entry was last written.
	UpdatedAt time.Time `json:"updated_at"`
	// Certificate is what the certificate of the run's death would hold,
	// as known at UpdatedAt: who, what, since when, its last status,
	// heartbeat, progress and spend, and the symptoms so far.
	Certificate *certs.Certificate `json:"certificate"`
}

// Killed is the keeper's record of the kill that followed hermeskilld's
// death.
type Killed struct {
	At        time.Time `json:"at"`
	Owner     int       `json:"owner_pid"`
	Keeper    int       `json:"keeper_pid"`
	Processes int       `json:"processes"` // killed, cgroups' members not counted
	Cgroups   []string  `json:"cgroups_removed"`
	Runs      []string  `json:"runs"` // the markers of the process-group runs
	Error     string    `json:"error,omitempty"`
}

// Covers reports whether k was the kill of e's processes.
func (k *Killed) Covers(e *Entry) bool {
	if k == nil || k.Owner != e.Owner.PID {
		return false
	}
	if e.Cgroup != "" {
		return slices.Contains(k.Cgroups, e.Cgroup)
	}
	return slices.Contains(k.Runs, e.Marker)
}

const (
	runExt    = ".run"
	claimExt  = ".claimed."
	killedPfx = "killed."
)

// Path is the entry file of a run in dir.
func Path(dir, agentID string, mainPID int, mainStart uint64) string {
	return filepath.Join(dir, fmt.Sprintf("%s.%d.%d%s", agentID, mainPID, mainStart, runExt))
}

// Write writes e at path, atomically but not synced: what it guards
// against is hermeskilld's death, which loses nothing the kernel was
// given, and a sync would cost every run's start a few milliseconds. A
// host crash can lose the entries of the last seconds (the agents die
// with the host; see docs/security.md). One writer per entry (its run).
//
// The entry is written to a spare file beside it, which then trades names
// with it (renameat2(2) RENAME_EXCHANGE): the entry's name always holds a
// whole entry, the spare keeps the one before, and the next write reuses
// the spare's inode. A daemon of many agents rewrites an entry every few
// seconds per agent; a temporary file renamed over the entry created and
// freed an inode each time, and that (the filesystem's inode allocation,
// the directory's lock held for the create and the rename) was most of an
// idle daemon's CPU at a thousand agents. Where the exchange is not
// supported (EINVAL) and for an entry's first write, the spare is renamed
// over the entry instead.
func Write(path string, e *Entry) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("run journal: %w", err)
	}
	e.UpdatedAt = time.Now().UTC()
	b, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("run journal: %w", err)
	}
	spare := sparePath(path)
	// Overwritten, then cut to length, not opened with O_TRUNC: ext4
	// takes a file truncated to 0 for a rewrite that must reach the disk
	// and starts its writeback at close (auto_da_alloc, ext4(5)), which
	// was a third of what a write cost.
	f, err := os.OpenFile(spare, os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("run journal: %w", err)
	}
	_, err = f.WriteAt(b, 0)
	if err == nil {
		err = f.Truncate(int64(len(b)))
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = unix.Renameat2(unix.AT_FDCWD, spare, unix.AT_FDCWD, path, unix.RENAME_EXCHANGE)
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) {
			// No entry yet, or no exchange here.
			err = os.Rename(spare, path)
		} else if err != nil {
			err = &os.LinkError{Op: "renameat2", Old: spare, New: path, Err: err}
		}
	}
	if err != nil {
		os.Remove(spare)
		return fmt.Errorf("run journal: %w", err)
	}
	return nil
}

// sparePath is the spare file of the entry at path: a name Recover never
// takes for an entry (and removes once a minute old, as a write cut
// short).
func sparePath(path string) string {
	return filepath.Join(filepath.Dir(path), ".entry-"+filepath.Base(path)+".spare")
}

// Remove removes the entry at path: the run's end is recorded.
func Remove(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("run journal: %w", err)
	}
	_ = os.Remove(sparePath(path)) // the entry before: nothing reads it
	return nil
}

// WriteKilled writes k into dir, durably.
func WriteKilled(dir string, k *Killed) error {
	b, err := json.Marshal(k)
	if err != nil {
		return err
	}
	path := filepath.Join(dir, fmt.Sprintf("%s%d.%d.json", killedPfx, k.Owner, k.At.UnixNano()))
	return atomicfile.WriteFile(path, b, 0o600)
}

// Recover calls fn for each entry in dir whose owner is dead, with the
// keeper's record of its kill (nil when there is none: the keeper died
// too, or never learnt of the run), and removes the entry once fn
// returned nil. Two hermeskilld starting at once never both take one
// entry: each is claimed by a rename first. Killed records go once no
// entry of their owner is left. The error joins what could not be read.
func Recover(dir string, fn func(e *Entry, k *Killed) error) (int, error) {
	return recoverIn(dir, procfs.Default(), fn)
}

func recoverIn(dir string, fsys procfs.FS, fn func(e *Entry, k *Killed) error) (int, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("run journal: %w", err)
	}
	var errs []error
	var kills []*Killed
	var killFiles []string
	for _, de := range ents {
		name := de.Name()
		if strings.HasPrefix(name, ".entry-") {
			// A write cut short by a SIGKILL; one being written now is
			// younger than a minute.
			if fi, err := de.Info(); err == nil && time.Since(fi.ModTime()) > time.Minute {
				_ = os.Remove(filepath.Join(dir, name))
			}
			continue
		}
		if !strings.HasPrefix(name, killedPfx) || !strings.HasSuffix(name, ".json") {
			continue
		}
		var k Killed
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err == nil {
			err = json.Unmarshal(b, &k)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("run journal %s: %w", name, err))
			continue
		}
		kills = append(kills, &k)
		killFiles = append(killFiles, name)
	}
	n := 0
	pending := map[int]bool{} // owners with entries left
	for _, de := range ents {
		name := de.Name()
		base, claimer, ok := entryName(name)
		if !ok || (claimer > 0 && claimer != os.Getpid() && unix.Kill(claimer, 0) == nil) {
			continue // not an entry, or another start is recording it now
		}
		path := filepath.Join(dir, name)
		e, err := readEntry(path)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if e.Owner.alive(fsys) {
			pending[e.Owner.PID] = true
			continue // its hermeskilld runs: not lost
		}
		// Claimed by a rename (a claim whose claimer died is taken
		// again): of two starts, one rename finds the name gone.
		claimed := filepath.Join(dir, base+claimExt+strconv.Itoa(os.Getpid()))
		if err := os.Rename(path, claimed); err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, fmt.Errorf("run journal: %w", err))
			}
			continue // another start took it
		}
		var kill *Killed
		for _, k := range kills {
			if k.Covers(e) {
				kill = k
			}
		}
		if err := fn(e, kill); err != nil {
			errs = append(errs, err)
			pending[e.Owner.PID] = true
			_ = os.Rename(claimed, filepath.Join(dir, base))
			continue
		}
		_ = os.Remove(claimed)
		n++
	}
	for i, k := range kills {
		if !pending[k.Owner] {
			_ = os.Remove(filepath.Join(dir, killFiles[i]))
		}
	}
	if n > 0 {
		_ = atomicfile.SyncDir(dir)
	}
	return n, errors.Join(errs...)
}

// entryName parses an entry's file name: NAME.run, or NAME.run.claimed.PID
// while the start PID records it.
func entryName(name string) (base string, claimer int, ok bool) {
	if strings.HasSuffix(name, runExt) {
		return name, 0, true
	}
	i := strings.LastIndex(name, runExt+claimExt)
	if i < 0 {
		return "", 0, false
	}
	pid, err := strconv.Atoi(name[i+len(runExt+claimExt):])
	if err != nil || pid <= 0 {
		return "", 0, false
	}
	return name[:i+len(runExt)], pid, true
}

func readEntry(path string) (*Entry, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("run journal: %w", err)
	}
	var e Entry
	if err := json.Unmarshal(b, &e); err != nil {
		return nil, fmt.Errorf("run journal %s: %w", path, err)
	}
	if e.Certificate == nil || e.Owner.PID <= 0 {
		return nil, fmt.Errorf("run journal %s: no certificate or owner", path)
	}
	return &e, nil
}
