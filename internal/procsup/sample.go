package procsup

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/hermeskill/hermeskilld/internal/procfs"
)

// sampling is what the tree keeps open between samples: the kernel checks
// read the same few files once a second for every agent, and on a host of
// a thousand agents an open/read/close per file is most of the daemon's
// CPU. Held files are re-read with pread(2) at offset 0 (cgroupfs and
// procfs regenerate their content on every read from the start). Owned
// by the goroutine that samples (the agent's supervisor loop).
type sampling struct {
	procs   *procfs.Sampler
	cgProcs *os.File // the cgroup's own cgroup.procs
	cpuStat *os.File // the cgroup's cpu.stat
	buf     []byte
}

func (s *sampling) close() {
	if s.procs != nil {
		s.procs.Close()
	}
	for _, f := range []*os.File{s.cgProcs, s.cpuStat} {
		if f != nil {
			f.Close()
		}
	}
}

// read re-reads a held file (opened on first use) into the buffer.
func (s *sampling) read(f **os.File, path string) ([]byte, error) {
	if *f == nil {
		h, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		*f = h
	}
	if s.buf == nil {
		s.buf = make([]byte, 1<<10) // grows when a tree needs it
	}
	n, err := (*f).ReadAt(s.buf, 0)
	if n == len(s.buf) {
		s.buf = make([]byte, 2*len(s.buf)) // a bigger tree: read again next time
	}
	if n > 0 {
		return s.buf[:n], nil
	}
	return nil, err
}

// Usage measures the tree for the kernel checks: processes+threads, RSS,
// CPU ticks and, when asked, open descriptors. Call it from one goroutine.
func (t *Tree) Usage(withFDs bool) (procfs.Usage, error) {
	s := &t.sample
	if s.procs == nil {
		s.procs = t.fs.NewSampler(0)
	}
	var pids []int
	if t.cg != nil {
		// The cgroup's own member list: agents cannot create cgroups
		// below theirs (not delegated), so there is nothing to walk.
		data, err := s.read(&s.cgProcs, filepath.Join(t.cg.Path(), "cgroup.procs"))
		if err != nil {
			return procfs.Usage{}, err
		}
		pids = parsePIDs(data)
	} else {
		var err error
		if pids, err = t.PIDs(); err != nil {
			return procfs.Usage{}, err
		}
	}
	return s.procs.Usage(pids, withFDs)
}

func parsePIDs(data []byte) []int {
	pids := make([]int, 0, 8)
	for len(data) > 0 {
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		if pid, err := strconv.Atoi(string(line)); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// CPUTime is the tree's CPU time from its cgroup's cpu.stat, which cgroup
// v2 keeps even without the cpu controller (cgroup-v2.rst "cpu.stat ...
// usage_usec, user_usec, system_usec"). It counts processes that already
// exited, unlike a sum over /proc. ok is false without a cgroup. Call it
// from the goroutine that samples.
func (t *Tree) CPUTime() (user, sys time.Duration, ok bool) {
	if t.cg == nil {
		return 0, 0, false
	}
	data, err := t.sample.read(&t.sample.cpuStat, filepath.Join(t.cg.Path(), "cpu.stat"))
	if err != nil {
		return 0, 0, false
	}
	var haveUser, haveSys bool
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		k, v, found := bytes.Cut(sc.Bytes(), []byte(" "))
		if !found {
			continue
		}
		n, err := strconv.ParseUint(string(v), 10, 64)
		if err != nil {
			continue
		}
		switch string(k) {
		case "user_usec":
			user, haveUser = time.Duration(n)*time.Microsecond, true
		case "system_usec":
			sys, haveSys = time.Duration(n)*time.Microsecond, true
		}
	}
	return user, sys, haveUser && haveSys
}

// MemoryCurrent is the cgroup's memory.current, when the memory controller
// is enabled for it (probed once: not on a hybrid host).
func (t *Tree) MemoryCurrent() (int64, bool) {
	if t.cg == nil || t.noMemory {
		return 0, false
	}
	st, _ := t.cg.Stats()
	if !st.MemoryCurrent.Known {
		t.noMemory = true
		return 0, false
	}
	return int64(st.MemoryCurrent.Value), true
}

// OOMKills is how many processes of the tree the kernel's OOM killer
// killed, when the memory controller reports it.
func (t *Tree) OOMKills() (uint64, bool) {
	if t.cg == nil {
		return 0, false
	}
	st, _ := t.cg.Stats()
	return st.OOMKills.Value, st.OOMKills.Known
}
