// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

// Command benchcompare (make bench-compare) measures hermeskilld side by
// side with its peers and its floors — tini, dumb-init, coreutils
// timeout, a bare /bin/true, an empty Go program, the harness's own fork,
// kill and recvmsg — and prints one markdown table of medians, spreads and
// ratios, with the targets of docs/benchmarks.md.
//
// Every comparison is interleaved (A B A B …) so that the noise of a shared
// machine falls on both sides. The row groups, one file each:
//
//	launch.go    1 start-up: supervise, tini, dumb-init, /bin/true, empty Go, version
//	ladder.go    2 ladder step precision: supervise vs timeout on a wedged agent
//	detect.go    3 detection lateness, many agents under one daemon
//	killtree.go  4 kill-to-empty of trees of 1, 10, 100 processes vs kill -9
//	ingest.go    5 heartbeat ingest rate and daemon CPU per heartbeat
//	daemon.go    6 a daemon with N agents: start, steady CPU and RSS, shutdown
//	gateway.go   7 the LLM gateway vs a bare httputil.ReverseProxy vs direct
//
// Everything runs under one temporary directory and in process groups the
// harness tracks; both are removed on exit and on Ctrl-C.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

type config struct {
	hk          string
	floor       string // the launch floor program (agents/launchfloor), built as hk is
	hkDyn       string // hk as a plain `go build` makes it where gcc is: dynamically linked
	floorDyn    string // the launch floor, built the same way
	quick       bool
	rows        map[int]bool
	rounds      int             // 1: launch rounds
	ladderRuns  int             // 2: rounds of the ladder comparison
	ladderPar   int             // 2: runs of each variant at once per round
	agents      int             // 3, 5: agents under one daemon
	killRuns    int             // 4: runs per tree size and variant
	n           int             // 6: agents of the big daemon
	window      time.Duration   // 6: the steady-state CPU window
	ingest      time.Duration   // 5: each ingest window
	gwN         int             // 7: requests per path at concurrency 1
	gwConc      int             // 7: agents at once in the throughput windows
	gwRounds    int             // 7: interleaved rounds of throughput windows
	gwWindow    time.Duration   // 7: each throughput window
	gwStreams   []int           // 7: counts of streams held open at once
	gwEvery     time.Duration   // 7: their chunks' period
	gwHold      time.Duration   // 7: how long they are held
	gwMany      int             // 7: the many streams held at a low rate (0: not)
	gwManyEvery time.Duration   // 7: their chunks' period
	gwManyHold  time.Duration   // 7: how long they are held
	gwProfile   string          // 7: where the proxies' heap profiles go ("": none)
	gwParts     map[string]bool // 7: the parts of the group to run
	gwSLOFrom   int             // 7: the open loop's first rate, requests per second
	gwSLOMax    int             // 7: its last
	gwSLOWindow time.Duration   // 7: each of its steps, per path
	install     bool
	out, log    io.Writer
	cleanupWait time.Duration
}

func parseFlags(args []string, out, log io.Writer) (config, error) {
	c := config{out: out, log: log, cleanupWait: 10 * time.Second}
	fs := flag.NewFlagSet("benchcompare", flag.ContinueOnError)
	fs.SetOutput(log)
	fs.StringVar(&c.hk, "hk", "bin/hermeskilld", "the hermeskilld binary to measure")
	fs.StringVar(&c.floor, "floor", "", "launch: the launch floor program, built as -hk is (make bench-compare builds it)")
	fs.StringVar(&c.hkDyn, "hk-dynamic", "", "launch: hermeskilld built by a plain `go build` with cgo (dynamically linked)")
	fs.StringVar(&c.floorDyn, "floor-dynamic", "", "launch: the launch floor built the same way as -hk-dynamic")
	fs.BoolVar(&c.quick, "quick", false, "fewer repetitions and shorter windows (a minute or two)")
	rows := fs.String("rows", "1,2,3,4,5,6,7", "row groups to run")
	fs.IntVar(&c.rounds, "rounds", 0, "launch: interleaved rounds (default 200, -quick 30)")
	fs.IntVar(&c.ladderRuns, "ladder-rounds", 0, "ladder: rounds (default 10, -quick 1)")
	fs.IntVar(&c.ladderPar, "ladder-par", 0, "ladder: runs of each variant at once per round (default 5, -quick 2)")
	fs.IntVar(&c.agents, "agents", 0, "detection and ingest: agents under one daemon (default 100, -quick 20)")
	fs.IntVar(&c.killRuns, "kill-runs", 0, "kill-to-empty: runs per tree size and variant (default 15, -quick 3)")
	fs.IntVar(&c.n, "n", 0, "daemon: agents (default 1000, -quick 100; 10000 raises limits as root)")
	fs.DurationVar(&c.window, "window", 0, "daemon: steady-state CPU window (default 30s, -quick 5s)")
	fs.DurationVar(&c.ingest, "ingest-window", 0, "ingest: each window (default 5s, -quick 2s)")
	fs.IntVar(&c.gwN, "gw-n", 0, "gateway: requests per path at concurrency 1 (default 2000, -quick 300)")
	fs.IntVar(&c.gwConc, "gw-conc", 0, "gateway: agents at once in the throughput windows (default 16, -quick 8)")
	fs.IntVar(&c.gwRounds, "gw-rounds", 0, "gateway: interleaved rounds of throughput windows (default 3, -quick 2)")
	fs.DurationVar(&c.gwWindow, "gw-window", 0, "gateway: each throughput window (default 3s, -quick 1s)")
	streams := fs.String("gw-streams", "", "gateway: counts of streams held open at once, comma-separated (default 1000,4000, -quick 200)")
	fs.DurationVar(&c.gwEvery, "gw-every", 100*time.Millisecond, "gateway: the held streams' period between two chunks")
	fs.DurationVar(&c.gwHold, "gw-hold", 0, "gateway: how long the streams are held (default 10s, -quick 3s)")
	fs.IntVar(&c.gwMany, "gw-many", -1, "gateway: streams held at once at a low rate, through the bare proxy and the gateway; 0: none (default 10000, -quick 1000; raises RLIMIT_NOFILE)")
	fs.DurationVar(&c.gwManyEvery, "gw-many-every", time.Second, "gateway: the many streams' period between two chunks")
	fs.DurationVar(&c.gwManyHold, "gw-many-hold", 0, "gateway: how long the many streams are held (default 30s, -quick 5s)")
	parts := fs.String("gw-parts", "latency,rate,slo,held,many", "gateway: the parts to run: latency (c=1), rate (c=-gw-conc), slo (the rate within the added p99 bound), held (-gw-streams), many (-gw-many)")
	fs.IntVar(&c.gwSLOFrom, "gw-slo-from", 250, "gateway: the open loop's first rate (requests per second), doubled each step")
	fs.IntVar(&c.gwSLOMax, "gw-slo-max", 16000, "gateway: the open loop's highest rate")
	fs.DurationVar(&c.gwSLOWindow, "gw-slo-window", 0, "gateway: each step of the open loop, per path (default 2s, -quick 1s)")
	fs.StringVar(&c.gwProfile, "gw-profile", "", "gateway: a directory where each proxy's heap profile is written while the streams are held")
	fs.BoolVar(&c.install, "install", true, "apt-get install tini and dumb-init when absent (as root)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	def := func(p *int, full, quick int) {
		if *p <= 0 {
			*p = full
			if c.quick {
				*p = quick
			}
		}
	}
	def(&c.rounds, 200, 30)
	def(&c.ladderRuns, 10, 1)
	def(&c.ladderPar, 5, 2)
	def(&c.agents, 100, 20)
	def(&c.killRuns, 15, 3)
	def(&c.n, 1000, 100)
	def(&c.gwN, 2000, 300)
	def(&c.gwConc, 16, 8)
	def(&c.gwRounds, 3, 2)
	if c.gwMany < 0 {
		c.gwMany = 0
		def(&c.gwMany, 10000, 1000)
	}
	if *streams == "" {
		*streams = "1000,4000"
		if c.quick {
			*streams = "200"
		}
	}
	for _, f := range strings.Split(*streams, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return c, fmt.Errorf("-gw-streams: %q is not a count of streams", f)
		}
		c.gwStreams = append(c.gwStreams, n)
	}
	defd := func(p *time.Duration, full, quick time.Duration) {
		if *p <= 0 {
			*p = full
			if c.quick {
				*p = quick
			}
		}
	}
	defd(&c.window, 30*time.Second, 5*time.Second)
	defd(&c.ingest, 5*time.Second, 2*time.Second)
	defd(&c.gwWindow, 3*time.Second, time.Second)
	defd(&c.gwHold, 10*time.Second, 3*time.Second)
	defd(&c.gwManyHold, 30*time.Second, 5*time.Second)
	defd(&c.gwSLOWindow, 2*time.Second, time.Second)
	c.gwParts = map[string]bool{}
	for _, f := range strings.Split(*parts, ",") {
		switch f = strings.TrimSpace(f); f {
		case "latency", "rate", "slo", "held", "many":
			c.gwParts[f] = true
		default:
			return c, fmt.Errorf("-gw-parts: %q is not latency, rate, slo, held or many", f)
		}
	}
	c.rows = map[int]bool{}
	for _, f := range strings.Split(*rows, ",") {
		i, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || i < 1 || i > 7 {
			return c, fmt.Errorf("-rows: %q is not a row group 1-7", f)
		}
		c.rows[i] = true
	}
	for _, f := range []struct{ name, path string }{{"hk", c.hk}, {"floor", c.floor}, {"hk-dynamic", c.hkDyn}, {"floor-dynamic", c.floorDyn}} {
		if f.path == "" && f.name != "hk" {
			continue
		}
		if _, err := os.Stat(f.path); err != nil {
			return c, fmt.Errorf("-%s: %v (make bench-compare builds it)", f.name, err)
		}
	}
	return c, nil
}

func main() {
	maybeServeProxy()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	os.Exit(run(ctx, cancel, os.Args[1:], os.Stdout, os.Stderr, true))
}

// run is the whole harness; it returns the exit status. With handleSignals
// it catches Ctrl-C (and SIGTERM, SIGHUP): every process is killed and the
// temporary directory removed before it exits 130.
func run(ctx context.Context, cancel context.CancelFunc, args []string, out, log io.Writer, handleSignals bool) int {
	cfg, err := parseFlags(args, out, log)
	if err != nil {
		fmt.Fprintln(log, "benchcompare:", err)
		return 2
	}
	for _, p := range []*string{&cfg.hk, &cfg.floor, &cfg.hkDyn, &cfg.floorDyn} {
		if *p == "" {
			continue
		}
		if *p, err = absPath(*p); err != nil {
			fmt.Fprintln(log, "benchcompare:", err)
			return 2
		}
	}
	tmp, err := os.MkdirTemp("", "hkbench-")
	if err != nil {
		fmt.Fprintln(log, "benchcompare:", err)
		return 1
	}
	_ = os.Chmod(tmp, 0o755)
	b := &bench{cfg: cfg, ctx: ctx, tmp: tmp, reg: newRegistry()}
	cleanup := func() {
		b.reg.killAll(cfg.cleanupWait)
		_ = os.RemoveAll(tmp)
	}
	if handleSignals {
		sig := make(chan os.Signal, 2)
		signal.Notify(sig, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
		defer signal.Stop(sig)
		go func() {
			s, ok := <-sig
			if !ok {
				return
			}
			fmt.Fprintf(log, "\nbenchcompare: %v: stopping every process, removing %s\n", s, tmp)
			cancel()
			go func() { // a second Ctrl-C, or a cleanup that hangs: go now
				select {
				case <-sig:
				case <-time.After(cfg.cleanupWait + 5*time.Second):
				}
				b.reg.killAll(0)
				_ = os.RemoveAll(tmp)
				os.Exit(130)
			}()
			cleanup()
			os.Exit(130)
		}()
	}
	defer cleanup()

	started := time.Now()
	b.load0 = loadAvg()
	if err := b.buildAgents(); err != nil {
		fmt.Fprintln(log, "benchcompare:", err)
		return 1
	}
	var rows, notes = []Row{}, []string{}
	groups := []struct {
		n  int
		fn func() ([]Row, []string)
	}{
		{1, b.launchRows}, {2, b.ladderRows}, {3, b.detectRows},
		{4, b.killRows}, {5, b.ingestRows}, {6, b.daemonRows}, {7, b.gatewayRows},
	}
	for _, g := range groups {
		if !cfg.rows[g.n] || b.interrupted() {
			continue
		}
		t := time.Now()
		r, n := g.fn()
		rows, notes = append(rows, r...), append(notes, n...)
		b.logf("row group %d done in %.1fs", g.n, time.Since(t).Seconds())
	}
	if b.interrupted() {
		return 130
	}
	fmt.Fprintln(out, machineLine(b))
	fmt.Fprintln(out)
	writeTable(out, rows)
	if len(notes) > 0 {
		fmt.Fprintln(out)
		for _, n := range notes {
			fmt.Fprintln(out, "- "+n)
		}
	}
	fmt.Fprintf(out, "\n(whole run %.0fs)\n", time.Since(started).Seconds())
	return 0
}

func absPath(p string) (string, error) {
	if strings.HasPrefix(p, "/") {
		return p, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	return wd + "/" + p, nil
}

// machineLine: CPU model, cores, kernel, Go, the binary's version, load.
func machineLine(b *bench) string {
	model := "unknown CPU"
	if raw, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range splitLines(string(raw)) {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	var u syscall.Utsname
	kernel := "?"
	if syscall.Uname(&u) == nil {
		kernel = utsString(u.Release[:])
	}
	ver := "?"
	if o, err := exec.Command(b.cfg.hk, "version").Output(); err == nil {
		ver = strings.TrimSpace(string(o))
	}
	size := ""
	if st, err := os.Stat(b.cfg.hk); err == nil {
		size = fmt.Sprintf(", %.1f MB binary", float64(st.Size())/1e6)
	}
	return fmt.Sprintf("**Machine:** %s, %d cores, Linux %s, %s; %s%s; load average %s at the start, %s at the end; %s.",
		model, runtime.NumCPU(), kernel, runtime.Version(), ver, size, b.load0, loadAvg(), time.Now().UTC().Format("2006-01-02 15:04 UTC"))
}

func utsString(a []int8) string {
	var sb strings.Builder
	for _, c := range a {
		if c == 0 {
			break
		}
		sb.WriteByte(byte(c))
	}
	return sb.String()
}

// loadAvg is the 1, 5 and 15 minute load averages.
func loadAvg() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(raw)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "?"
}
