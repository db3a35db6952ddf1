// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"path/filepath"
	"regexp"
	"strings"
	"sync"
)

// deriveID names an agent after its command, for a supervise given no id
// (no --id, none in its file). It is the script an interpreter runs
// (`python3 agent.py` is "agent", `java -jar bot.jar` "bot", `python3 -m
// research.bot` "research.bot"), else the program itself (`./bot` is
// "bot"). Programs that only start another command are looked through,
// with their options and assignments: `env X=1 node a.mjs` is "a", `npx tsx
// agent.ts` and `uv run agent.py` are "agent", `timeout 1h ./bot` is "bot".
// Code given inline (`python3 -c …`, `bash -c …`, `node -e …`) is named
// after its interpreter: "python3", "bash", "node". The result is a valid
// id of at most 48 characters; "agent" when nothing of the command is.
func deriveID(argv []string) string {
	if id := nameCommand(argv, 0); id != "" {
		return id
	}
	return "agent"
}

// maxDepth bounds the programs looked through (env -S can nest).
const maxDepth = 8

// nameCommand is the id argv's words give, or "".
func nameCommand(argv []string, depth int) string {
	if len(argv) == 0 || depth > maxDepth {
		return ""
	}
	self := idSafe(stem(argv[0]))
	p := programs()[programKey(filepath.Base(argv[0]))]
	if p == nil {
		return self
	}
	if n := p.name(self, argv[1:], depth); n != "" {
		return n
	}
	return self
}

// operandKind is what a program's first operand (the first word after its
// options) says of the agent.
type operandKind int

const (
	opScript  operandKind = iota // a file the program runs: its name without extension
	opCommand                    // the command the program starts: named in turn
	opTask                       // a name (a package.json script, a deno task): as it is
	opClass                      // java: a jar or source file, or a class (its last component)
	opNone                       // nothing: the program's own name
)

// optRole is what an option does with its value.
type optRole int

const (
	optValue  optRole = iota + 1 // takes a value that names nothing (-W error, --with rich)
	optInline                    // code follows (or stdin is read): the program's own name
	optModule                    // a module follows (python -m http.server): it names the agent
	optFile                      // a file follows (java -jar bot.jar): its stem names the agent
	optSplit                     // a command line follows as one word (env -S)
)

// program is how one program's words are read: getopt-like options, an
// optional subcommand, then its operand.
type program struct {
	operand operandKind
	opts    map[string]optRole // options that are more than flags, with their dash(es)
	// grouped: short options may be grouped (-uc CODE); the first that
	// takes a value takes the rest of the word, or the next one.
	grouped bool
	assigns bool                // NAME=VALUE words before the operand are skipped (env, sudo)
	skip    int                 // operands before the one that counts (timeout's DURATION)
	subs    map[string]*program // subcommands, read with their own options
	// versioned: a command operand may carry a version (pkg@1.2,
	// tool==1.0), left out of the name.
	versioned bool
}

// name reads args, the words after the program (or its subcommand).
func (p *program) name(self string, args []string, depth int) string {
	for i := 0; i < len(args); i++ {
		w := args[i]
		if w == "--" {
			return p.at(self, args[i+1:], depth)
		}
		if len(w) < 2 || w[0] != '-' {
			return p.at(self, args[i:], depth)
		}
		opt, val, attached := p.option(w)
		role := p.opts[opt]
		if role == 0 {
			continue // a flag
		}
		if role == optInline {
			return self
		}
		if !attached {
			if i++; i == len(args) {
				return self
			}
			val = args[i]
		}
		switch role {
		case optModule:
			if p.operand == opClass {
				return idSafe(javaName(val))
			}
			return idSafe(val)
		case optFile:
			return idSafe(stem(val))
		case optSplit:
			return nameCommand(append(strings.Fields(val), args[i+1:]...), depth+1)
		}
	}
	return self
}

// option splits the option word w into the option and its attached value.
// In a group of short options (-euo VALUE) it is the first that is more
// than a flag, if any.
func (p *program) option(w string) (opt, val string, attached bool) {
	if strings.HasPrefix(w, "--") || !p.grouped {
		return strings.Cut(w, "=")
	}
	for j := 1; j < len(w); j++ {
		if o := "-" + w[j:j+1]; p.opts[o] != 0 {
			return o, w[j+1:], j+1 < len(w)
		}
	}
	return w, "", false
}

// at reads the operands: ops are the words after the options.
func (p *program) at(self string, ops []string, depth int) string {
	for p.assigns && len(ops) > 0 && isAssignment(ops[0]) {
		ops = ops[1:]
	}
	if len(ops) == 0 {
		return self
	}
	if sub := p.subs[ops[0]]; sub != nil {
		return sub.name(self, ops[1:], depth)
	}
	if len(ops) <= p.skip {
		return self
	}
	ops = ops[p.skip:]
	switch p.operand {
	case opScript:
		return idSafe(stem(ops[0]))
	case opClass:
		return idSafe(javaName(ops[0]))
	case opTask:
		return idSafe(ops[0])
	case opCommand:
		if p.versioned {
			ops = append([]string{unversioned(ops[0])}, ops[1:]...)
		}
		return nameCommand(ops, depth+1)
	}
	return self
}

// programKey is the name programs() knows a program by: python3.12 and
// pypy3 are python and pypy.
func programKey(base string) string {
	if k := strings.TrimRight(base, "0123456789."); k != "" {
		return k
	}
	return base
}

// stem is a path's last element without its extension: agent.py is agent.
func stem(path string) string {
	base := filepath.Base(path)
	return strings.TrimSuffix(base, filepath.Ext(base))
}

// javaName is what names a java program: a jar or source file's stem, or
// a main class's last component (com.acme.Bot, or mod/com.acme.Bot, is Bot).
func javaName(w string) string {
	if strings.HasSuffix(w, ".jar") || strings.HasSuffix(w, ".java") {
		return stem(w)
	}
	w = w[strings.LastIndex(w, "/")+1:]
	return w[strings.LastIndex(w, ".")+1:]
}

// unversioned is a package operand without its version or extras:
// @scope/pkg@1.2 is pkg, tool==1.0 and tool[extra] are tool.
func unversioned(w string) string {
	w = filepath.Base(w)
	if i := strings.IndexAny(w[1:], "@=<>~!["); i >= 0 {
		return w[:i+1]
	}
	return w
}

// isAssignment is a NAME=VALUE word, as env(1) and sudo(8) take them.
func isAssignment(w string) bool {
	k, _, ok := strings.Cut(w, "=")
	return ok && envName().MatchString(k)
}

var (
	envName  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`) })
	idUnsafe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`[^A-Za-z0-9._-]+`) })
)

// idSafe makes s a valid id, or "": runs of other characters become '-',
// no '.' or '-' at either end, at most 48 characters.
func idSafe(s string) string {
	s = strings.Trim(idUnsafe().ReplaceAllString(s, "-"), ".-")
	if len(s) > 48 {
		s = strings.TrimRight(s[:48], ".-")
	}
	return s
}

// opts builds a program's option table: each role, then its options.
func opts(groups ...any) map[string]optRole {
	m := map[string]optRole{}
	var role optRole
	for _, g := range groups {
		switch g := g.(type) {
		case optRole:
			role = g
		case string:
			m[g] = role
		}
	}
	return m
}

// programs are the interpreters, and the programs that start another
// command, that deriveID looks through. Any other program names the agent.
var programs = sync.OnceValue(func() map[string]*program {
	node := &program{operand: opScript, opts: opts(
		optInline, "-e", "--eval", "-p", "--print",
		optValue, "-r", "--require", "--import", "--loader", "--experimental-loader", "-C", "--conditions",
		"--input-type", "--title", "--env-file", "--env-file-if-exists", "--tsconfig")}
	tsx := &program{operand: opScript, opts: node.opts}
	tsx.subs = map[string]*program{"watch": tsx}
	shell := &program{operand: opScript, grouped: true, opts: opts(optInline, "-c", "-s", optValue, "-o", "-O", "--rcfile", "--init-file")}
	python := &program{operand: opScript, grouped: true, opts: opts(optInline, "-c", optModule, "-m", optValue, "-W", "-X", "--check-hash-based-pycs")}
	denoRun := &program{operand: opScript, opts: opts(optValue, "-c", "--config", "--import-map", "--lock", "--cert",
		"--location", "--seed", "--ext", "--env-file")}
	bunx := &program{operand: opCommand, versioned: true, opts: opts(optValue, "-p", "--package")}
	bun := &program{operand: opScript, opts: opts(optInline, "-e", "--eval", "-p", "--print",
		optValue, "-r", "--preload", "--cwd", "--env-file", "--config")}
	bun.subs = map[string]*program{"run": {operand: opScript, opts: bun.opts}, "x": bunx, "exec": {operand: opNone}}
	npmExec := &program{operand: opCommand, versioned: true, opts: opts(optInline, "-c", "--call", optValue, "-p", "--package", "-w", "--workspace")}
	npmRun := &program{operand: opTask, opts: opts(optValue, "-w", "--workspace")}
	pythonRun := opts(optModule, "-m", "--module",
		optValue, "--with", "--with-editable", "--with-requirements", "-p", "--python", "--project", "--directory",
		"--env-file", "--extra", "--group", "--only-group", "--no-group", "--package", "--index", "--default-index",
		"-i", "--index-url", "--extra-index-url", "-f", "--find-links", "--cache-dir", "--config-file", "-C",
		"--config-setting", "--python-platform", "--exclude-newer", "--link-mode", "--resolution", "--prerelease",
		"--index-strategy", "--keyring-provider", "-P", "--upgrade-package", "--reinstall-package",
		"--refresh-package", "--no-build-package", "--no-binary-package", "--color", "--from")
	uvx := &program{operand: opCommand, versioned: true, opts: pythonRun}
	condaRun := &program{operand: opCommand, opts: opts(optValue, "-n", "--name", "-p", "--prefix", "--cwd")}
	run := func(p *program) map[string]*program { return map[string]*program{"run": p} }

	return map[string]*program{
		// Interpreters: the script (or module) they run names the agent.
		"python": python, "pypy": python,
		"node": node, "nodejs": node, "tsx": tsx,
		"ts-node": {operand: opScript, opts: opts(optInline, "-e", "--eval", "-p", "--print",
			optValue, "-r", "--require", "-P", "--project", "-C", "--compiler", "-O", "--compiler-options")},
		"deno": {operand: opScript, opts: denoRun.opts, subs: map[string]*program{
			"run": denoRun, "serve": denoRun, "eval": {operand: opNone},
			"task": {operand: opTask, opts: opts(optValue, "-c", "--config", "--cwd", "-f", "--filter")}}},
		"bun":  bun,
		"ruby": {operand: opScript, grouped: true, opts: opts(optInline, "-e", optValue, "-I", "-r", "-C", "-E")},
		"perl": {operand: opScript, grouped: true, opts: opts(optInline, "-e", "-E", optValue, "-I", "-M", "-m")},
		"php":  {operand: opScript, opts: opts(optInline, "-r", optFile, "-f", optValue, "-d", "-c")},
		"sh":   shell, "bash": shell, "dash": shell, "zsh": shell, "ksh": shell, "mksh": shell, "ash": shell,
		"fish": {operand: opScript, grouped: true, opts: opts(optInline, "-c", "--command", optValue, "-C", "--init-command")},
		"java": {operand: opClass, opts: opts(optFile, "-jar", optModule, "-m", "--module",
			optValue, "-cp", "-classpath", "--class-path", "-p", "--module-path", "--upgrade-module-path",
			"--add-modules", "--add-opens", "--add-exports", "--add-reads", "--patch-module")},
		"go": {operand: opNone, subs: run(&program{operand: opScript, opts: opts(optValue, "-C", "-o", "-p", "-tags",
			"-ldflags", "-gcflags", "-asmflags", "-mod", "-modfile", "-overlay", "-pgo", "-exec", "-toolexec",
			"-pkgdir", "-installsuffix", "-buildmode", "-compiler", "-gccgoflags", "-coverpkg", "-covermode")})},

		// Runners: the command they start names the agent.
		"npx":  npmExec,
		"bunx": bunx,
		"npm": {operand: opNone, opts: opts(optValue, "--prefix", "-w", "--workspace"), subs: map[string]*program{
			"exec": npmExec, "x": npmExec, "run": npmRun, "run-script": npmRun}},
		"pnpm": {operand: opCommand, opts: opts(optValue, "-C", "--dir", "-F", "--filter"), subs: map[string]*program{
			"exec": {operand: opCommand}, "dlx": npmExec, "run": npmRun}},
		"yarn": {operand: opCommand, opts: opts(optValue, "--cwd"), subs: map[string]*program{
			"exec": {operand: opCommand}, "dlx": npmExec, "run": npmRun}},
		"uv": {operand: opNone, opts: opts(optValue, "--directory", "--project", "--config-file", "--cache-dir", "--color"),
			subs: map[string]*program{"run": {operand: opCommand, opts: pythonRun}, "tool": {operand: opNone, subs: run(uvx)}}},
		"uvx":    uvx,
		"poetry": {operand: opNone, opts: opts(optValue, "-C", "--directory", "-P", "--project"), subs: run(&program{operand: opCommand})},
		"pipenv": {operand: opNone, subs: run(&program{operand: opCommand})},
		"pdm":    {operand: opNone, subs: run(&program{operand: opCommand, opts: opts(optValue, "-p", "--project")})},
		"pixi":   {operand: opNone, subs: run(&program{operand: opCommand, opts: opts(optValue, "-e", "--environment", "--manifest-path")})},
		"conda":  {operand: opNone, subs: run(condaRun)}, "mamba": {operand: opNone, subs: run(condaRun)},
		"micromamba": {operand: opNone, subs: run(condaRun)},

		// Programs that start a command with a setting changed.
		"env": {operand: opCommand, grouped: true, assigns: true, opts: opts(
			optValue, "-u", "--unset", "-C", "--chdir", "-P", optSplit, "-S", "--split-string")},
		"sudo": {operand: opCommand, grouped: true, assigns: true, opts: opts(optValue, "-u", "--user", "-g", "--group",
			"-C", "--close-from", "-D", "--chdir", "-p", "--prompt", "-r", "--role", "-t", "--type", "-T",
			"--command-timeout", "-U", "--other-user", "-R", "--chroot", "-h", "--host")},
		"doas":      {operand: opCommand, grouped: true, opts: opts(optValue, "-u", "-C")},
		"timeout":   {operand: opCommand, grouped: true, skip: 1, opts: opts(optValue, "-s", "--signal", "-k", "--kill-after")},
		"nice":      {operand: opCommand, grouped: true, opts: opts(optValue, "-n", "--adjustment")},
		"ionice":    {operand: opCommand, grouped: true, opts: opts(optValue, "-c", "--class", "-n", "--classdata")},
		"chrt":      {operand: opCommand, grouped: true, skip: 1, opts: opts(optValue, "-T", "--sched-runtime", "-P", "--sched-period", "-D", "--sched-deadline")},
		"taskset":   {operand: opCommand, grouped: true, skip: 1},
		"nohup":     {operand: opCommand},
		"setsid":    {operand: opCommand, grouped: true},
		"stdbuf":    {operand: opCommand, grouped: true, opts: opts(optValue, "-i", "--input", "-o", "--output", "-e", "--error")},
		"time":      {operand: opCommand, grouped: true, opts: opts(optValue, "-f", "--format", "-o", "--output")},
		"tini":      {operand: opCommand, grouped: true, opts: opts(optValue, "-p", "-e")},
		"dumb-init": {operand: opCommand, grouped: true, opts: opts(optValue, "-r", "--rewrite")},
	}
})
