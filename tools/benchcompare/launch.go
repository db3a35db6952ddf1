// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// ensureTools finds tini and dumb-init, installing them with apt-get when
// absent and allowed (root). It returns their paths; an empty path comes
// with the reason.
func (b *bench) ensureTools() (paths map[string]string, why map[string]string) {
	paths, why = map[string]string{}, map[string]string{}
	names := []string{"tini", "dumb-init"}
	look := func() (missing []string) {
		for _, n := range names {
			if p, err := exec.LookPath(n); err == nil {
				paths[n] = p
			} else {
				missing = append(missing, n)
			}
		}
		return missing
	}
	missing := look()
	if len(missing) == 0 {
		return paths, why
	}
	reason := "not installed (apt-get install tini dumb-init)"
	switch _, aptErr := exec.LookPath("apt-get"); {
	case !b.cfg.install:
		reason = "not installed, and -install=false"
	case os.Geteuid() != 0:
		reason = "not installed, and installing needs root"
	case aptErr != nil:
		reason = "not installed, and there is no apt-get"
	default:
		b.logf("installing %v with apt-get", missing)
		cmd := exec.CommandContext(b.ctx, "apt-get", append([]string{"install", "-y"}, missing...)...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if msg, err := cmd.CombinedOutput(); err != nil {
			reason = fmt.Sprintf("apt-get install failed: %v: %s", err, lastLine(string(msg)))
		}
		missing = look()
	}
	for _, n := range missing {
		why[n] = reason
	}
	return paths, why
}

func lastLine(s string) string {
	l := splitLines(s)
	for i := len(l) - 1; i >= 0; i-- {
		if l[i] != "" {
			return l[i]
		}
	}
	return ""
}

// timeRun forks and execs argv with every standard stream on /dev/null,
// in a process group of its own, and returns the time from just before
// the fork to just after the reap (wait4), in ms.
func (b *bench) timeRun(argv []string, null *os.File) (float64, error) {
	attr := &syscall.ProcAttr{
		Env:   os.Environ(),
		Files: []uintptr{null.Fd(), null.Fd(), null.Fd()},
		Sys:   &syscall.SysProcAttr{Setpgid: true},
	}
	t := time.Now()
	pid, err := syscall.ForkExec(argv[0], argv, attr)
	if err != nil {
		return 0, err
	}
	b.reg.add(pid, false)
	var ws syscall.WaitStatus
	for {
		_, err = syscall.Wait4(pid, &ws, 0, nil)
		if err != syscall.EINTR {
			break
		}
	}
	d := time.Since(t)
	b.reg.remove(pid)
	if err != nil {
		return 0, err
	}
	if !ws.Exited() || ws.ExitStatus() != 0 {
		return 0, fmt.Errorf("%v: %v", argv, describe(ws))
	}
	return float64(d.Nanoseconds()) / 1e6, nil
}

func describe(ws syscall.WaitStatus) string {
	if ws.Signaled() {
		return "killed by " + ws.Signal().String()
	}
	return fmt.Sprintf("exit status %d", ws.ExitStatus())
}

// launchRows: row group 1.
func (b *bench) launchRows() ([]Row, []string) {
	const g = "1 launch"
	tools, why := b.ensureTools()
	certs := filepath.Join(b.tmp, "launch-certs")
	type cand struct {
		name string
		argv []string
		ms   []float64
		err  error
	}
	trueBin := "/bin/true"
	if p, err := exec.LookPath("true"); err == nil && !fileExists(trueBin) {
		trueBin = p
	}
	all := []*cand{
		{name: "`/bin/true` (bare)", argv: []string{trueBin}},
		{name: "`tini -s -- /bin/true`", argv: []string{tools["tini"], "-s", "--", trueBin}},
		{name: "`dumb-init /bin/true`", argv: []string{tools["dumb-init"], trueBin}},
		{name: "`hermeskilld supervise -- /bin/true`", argv: []string{b.cfg.hk, "supervise", "--certs-dir", certs, "--", trueBin}},
		{name: "`hermeskilld supervise --containment pgroup -- /bin/true`", argv: []string{b.cfg.hk, "supervise", "--containment", "pgroup", "--certs-dir", certs, "--", trueBin}},
		{name: "empty Go program (floor)", argv: []string{b.empty}},
		{name: "`hermeskilld version`", argv: []string{b.cfg.hk, "version"}},
	}
	// The launch floor: hermeskilld's packages initialised, a keeper
	// exec'd, /bin/true forked, exec'd and reaped, nothing else. Also
	// both as a plain `go build` links them (dynamically, where gcc is).
	if b.cfg.floor != "" {
		all = append(all, &cand{name: nameFloor, argv: []string{b.cfg.floor, trueBin}})
	}
	if b.cfg.hkDyn != "" {
		all = append(all, &cand{name: nameDyn, argv: []string{b.cfg.hkDyn, "supervise", "--certs-dir", certs, "--", trueBin}})
	}
	if b.cfg.floorDyn != "" {
		all = append(all, &cand{name: nameFloorDyn, argv: []string{b.cfg.floorDyn, trueBin}})
	}
	var cands []*cand
	for _, c := range all {
		if c.argv[0] != "" {
			cands = append(cands, c)
		}
	}
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return []Row{failed(g, "launch", err)}, nil
	}
	defer null.Close()
	b.logf("1 launch: %d interleaved rounds of %d commands", b.cfg.rounds, len(cands))
	const warmup = 5
	for r := -warmup; r < b.cfg.rounds && !b.interrupted(); r++ {
		for i := range cands { // rotate the order: no command is always first
			c := cands[(i+max(r, 0))%len(cands)]
			if c.err != nil {
				continue
			}
			ms, err := b.timeRun(c.argv, null)
			if err != nil {
				c.err = err
				continue
			}
			if r >= 0 {
				c.ms = append(c.ms, ms)
			}
		}
	}
	med := map[string]float64{}
	var rows []Row
	for _, c := range all {
		if c.argv[0] == "" {
			tool := "tini"
			if c.name == "`dumb-init /bin/true`" {
				tool = "dumb-init"
			}
			rows = append(rows, skipped(g, c.name, tool+" "+why[tool]))
			continue
		}
		if c.err != nil {
			rows = append(rows, failed(g, c.name, c.err))
			continue
		}
		r, s := durRow(g, c.name+" fork → reaped", c.ms, false)
		med[c.name] = s.P50
		rows = append(rows, r)
	}
	bare := med["`/bin/true` (bare)"]
	tini, haveTini := med["`tini -s -- /bin/true`"]
	empty := med["empty Go program (floor)"]
	floors := map[string]string{"`hermeskilld supervise -- /bin/true`": nameFloor, nameDyn: nameFloorDyn}
	for i := range rows {
		name := all[i].name
		m, ok := med[name]
		if !ok {
			continue
		}
		switch name {
		case "`/bin/true` (bare)":
			rows[i].Versus = "floor"
		case "`hermeskilld supervise -- /bin/true`":
			if haveTini {
				ratio := Ratio(m, tini)
				rows[i].Versus = fmtRatio(ratio) + " vs tini" + overFloor(m, med, floors[name])
				rows[i].Target = "≤ ×2.0 vs tini"
				rows[i].OK = checkLE(ratio, 2.0)
			} else {
				rows[i].Versus = fmtRatio(Ratio(m, bare)) + " vs /bin/true"
				rows[i].Target = "≤ ×2.0 vs tini (no tini)"
			}
		case "`hermeskilld version`":
			d := m - empty
			rows[i].Versus = fmtSignedMs(d) + " vs empty Go"
			rows[i].Target = "≤ +3 ms vs empty Go"
			rows[i].OK = checkLE(d, 3)
		case "empty Go program (floor)":
			rows[i].Versus = fmtRatio(Ratio(m, bare)) + " vs /bin/true"
		default:
			if haveTini && name != "`tini -s -- /bin/true`" {
				rows[i].Versus = fmtRatio(Ratio(m, tini)) + " vs tini" + overFloor(m, med, floors[name])
			} else {
				rows[i].Versus = fmtRatio(Ratio(m, bare)) + " vs /bin/true"
			}
		}
	}
	return rows, nil
}

// Names of the launch floor rows.
const (
	nameFloor    = "floor: hermeskilld's packages, a keeper exec, then fork/exec/wait `/bin/true`"
	nameDyn      = "`hermeskilld supervise -- /bin/true`, built by a plain `go build` (dynamic)"
	nameFloorDyn = "floor, built by a plain `go build` (dynamic)"
)

// overFloor says how much of a median m is above its launch floor's
// (the floor row named floor), when that was measured.
func overFloor(m float64, med map[string]float64, floor string) string {
	f, ok := med[floor]
	if floor == "" || !ok {
		return ""
	}
	return fmt.Sprintf(" (%s over its floor)", fmtSignedMs(m-f))
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
