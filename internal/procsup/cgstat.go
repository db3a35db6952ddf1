package procsup

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// CPUTime is the tree's CPU time from its cgroup's cpu.stat, which cgroup
// v2 keeps even without the cpu controller (cgroup-v2.rst "cpu.stat ...
// usage_usec, user_usec, system_usec"). It counts processes that already
// exited, unlike a sum over /proc. ok is false without a cgroup.
func (t *Tree) CPUTime() (user, sys time.Duration, ok bool) {
	if t.cg == nil {
		return 0, 0, false
	}
	data, err := os.ReadFile(filepath.Join(t.cg.Path(), "cpu.stat"))
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
// is enabled for it (not on a hybrid host).
func (t *Tree) MemoryCurrent() (int64, bool) {
	if t.cg == nil {
		return 0, false
	}
	st, _ := t.cg.Stats()
	if !st.MemoryCurrent.Known {
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
