// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"bytes"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// holdSpec is one measurement of streams held open at once: n streams of
// one chunk per every, each held for hold.
type holdSpec struct {
	n     int
	every time.Duration
	hold  time.Duration
}

func (h holdSpec) String() string {
	return fmt.Sprintf("%d streams of one chunk per %s held %s", h.n, h.every, h.hold)
}

// stalled is a gap between two chunks of a held stream that makes it
// stalled: a second later than its period.
func (h holdSpec) stalled(gap time.Duration) bool { return gap > h.every+stallGap }

const stallGap = time.Second

// holdResult is what holding the streams of a holdSpec measured.
type holdResult struct {
	stalled int       // streams broken, or with a gap over the stall bound
	gaps    []float64 // each stream's longest gap, ms
	openIn  time.Duration
	// the proxy's, per open stream (0 for the direct path): RSS, and
	// after a GC heap in use, goroutine stacks and goroutines
	rss, heap, stacks, goroutines float64
	// cpu is the proxy's utime+stime while every stream was open, in
	// seconds per second (1: one core busy); window is that time
	cpu        float64
	window     time.Duration
	cpuStreams float64 // the streams open in the window, on average
	// measured is the streams open when the memory was read
	measured int
}

// heldRows: the streams of each holdSpec held at once on each path in
// turn, and what each proxy holds per open stream.
func (b *bench) heldRows(g string, up *fakeUpstream, paths []*benchPath, specs []holdSpec, profile string) []Row {
	var rows []Row
	for _, h := range specs {
		var bare holdResult
		for _, p := range paths {
			name := fmt.Sprintf("%s: %s", h, p.name)
			// The proxies' idle upstream connections of the runs before are
			// descriptors of the harness's too: closed, not counted.
			up.closeIdle()
			res, err := b.holdFresh(p, up, h, profile)
			if err != nil {
				rows = append(rows, failed(g, name, err))
				continue
			}
			s := Summarize(res.gaps)
			r := Row{Group: g, Name: name + " (longest gap between two chunks)", N: h.n,
				P50: fmt.Sprintf("%d of %d held", h.n-res.stalled, h.n), P99: fmtMs(s.P99), Max: fmtMs(s.Max),
				Versus: fmt.Sprintf("all open in %.1fs", res.openIn.Seconds())}
			if p.name == "gateway" {
				r.Target, r.OK = "every stream held", check(res.stalled == 0)
			}
			rows = append(rows, r)
			if p.pid() == 0 {
				continue
			}
			mem := Row{Group: g, Name: fmt.Sprintf("%s, %d open: RSS per open stream (live heap + stacks; goroutines)", p.name, res.measured),
				P50:    fmt.Sprintf("%.1f KiB", res.rss/1024),
				Spread: fmt.Sprintf("%.1f + %.1f KiB; %.1f", res.heap/1024, res.stacks/1024, res.goroutines)}
			cpu := Row{Group: g, Name: fmt.Sprintf("%s, %.0f open: CPU while they were open", p.name, res.cpuStreams),
				P50:    fmt.Sprintf("%.1f%% of a core", 100*res.cpu),
				Spread: fmt.Sprintf("%.1f µs per chunk", res.cpu*1e6*h.every.Seconds()/max(res.cpuStreams, 1))}
			switch p.name {
			case "bare proxy":
				bare = res
			case "gateway":
				if bare.rss > 0 {
					mem.Versus = fmtRatio(res.rss/bare.rss) + " of bare proxy"
					mem.Target, mem.OK = "≤ ×1.25 of bare proxy", checkLE(res.rss/bare.rss, 1.25)
				}
				if bare.cpu > 0 {
					cpu.Versus = fmtRatio(res.cpu/bare.cpu) + " of bare proxy"
				}
			}
			rows = append(rows, mem, cpu)
			if b.interrupted() {
				return rows
			}
		}
	}
	return rows
}

// holdFresh holds the streams of h on a proxy of p's kind started for
// them, and stopped after: the RSS it gains is then the streams', not
// less for memory the runs before left it to reuse (the direct path is
// held as it is).
func (b *bench) holdFresh(p *benchPath, up *fakeUpstream, h holdSpec, profile string) (holdResult, error) {
	if p.pid() == 0 {
		return b.holdStreams(p, h, profile)
	}
	fresh, err := b.startProxy(p.kind, up.url)
	if err != nil {
		return holdResult{}, err
	}
	defer b.stopProxy(fresh)
	return b.holdStreams(fresh, h, profile)
}

// holdStreams opens h.n streams on p, their starts spread over one
// chunk's period, and reads each until its end. With profile set, a heap
// profile of the proxy is written there while every stream is open.
func (b *bench) holdStreams(p *benchPath, h holdSpec, profile string) (holdResult, error) {
	var res holdResult
	var rss0, heap0, stacks0, g0 int64
	if p.pid() != 0 {
		var err error
		if heap0, stacks0, g0, err = p.liveMem(); err != nil {
			return res, err
		}
		runtimeSettle()
		rss0, _, _ = procStatus(p.pid())
	}
	c := benchClient(h.n)
	defer c.CloseIdleConnections()
	var opened, finished sync.WaitGroup
	opened.Add(h.n)
	var mu sync.Mutex
	var firstErr error
	var open atomic.Int64 // streams between their first chunk and their end
	t0 := time.Now()
	for i := range h.n {
		finished.Go(func() {
			var once sync.Once
			first := func() { once.Do(func() { open.Add(1); opened.Done() }) }
			defer first()
			time.Sleep(time.Duration(i) * h.every / time.Duration(h.n))
			gap, err := holdOne(c, p, h, first)
			first()
			open.Add(-1)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				firstErr = cmpErr(firstErr, err)
				res.stalled++
				return
			}
			res.gaps = append(res.gaps, ms(gap))
			if h.stalled(gap) {
				res.stalled++
			}
		})
	}
	opened.Wait()
	res.openIn = time.Since(t0)
	if p.pid() != 0 {
		rss1, _, err := procStatus(p.pid())
		if err != nil {
			return res, err
		}
		// Per stream open now: under load the first may have ended
		// before the last opened.
		n := float64(max(open.Load(), 1))
		res.rss = float64(rss1-rss0) / n
		heap1, stacks1, g1, err := p.liveMem()
		if err != nil {
			return res, err
		}
		res.heap, res.stacks, res.goroutines = float64(heap1-heap0)/n, float64(stacks1-stacks0)/n, float64(g1-g0)/n
		res.measured = int(n)
		// The CPU window: a quarter of the hold, the streams open at its
		// start and its end averaged.
		ticks0, _ := cpuTicks(p.pid())
		w0, open0 := time.Now(), open.Load()
		time.Sleep(h.hold / 4)
		ticks1, _ := cpuTicks(p.pid())
		res.window = time.Since(w0)
		res.cpu = float64(ticks1-ticks0) / clockTick / res.window.Seconds()
		res.cpuStreams = float64(open0+open.Load()) / 2
		if profile != "" {
			path := filepath.Join(profile, fmt.Sprintf("%s-%d-heap.pprof", strings.ReplaceAll(p.name, " ", "-"), h.n))
			if _, err := p.ask("heap " + path); err != nil {
				return res, err
			}
			b.logf("7 gateway: %s", path)
		}
	}
	finished.Wait()
	if firstErr != nil && res.stalled == h.n {
		return res, firstErr
	}
	return res, nil
}

// runtimeSettle gives the proxy a moment to return what the last window
// used: its RSS is read before the streams open.
func runtimeSettle() { time.Sleep(200 * time.Millisecond) }

// holdOne reads one held stream to its end; open is called at its first
// chunk. gap is the longest wait between two chunks.
func holdOne(c *http.Client, p *benchPath, h holdSpec, open func()) (gap time.Duration, err error) {
	body := `{"model":"gpt-4.1-mini","messages":[{"role":"user","content":"hello"}],"stream":true}`
	req, err := http.NewRequest(http.MethodPost, fmt.Sprintf("%s/chat/completions?hold=%s&every=%s", p.base, h.hold, h.every), strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+p.key)
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("%s: status %d", p.name, resp.StatusCode)
	}
	br := bufio.NewReader(resp.Body)
	var last time.Time
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return gap, fmt.Errorf("%s: stream broken: %w", p.name, err)
		}
		if bytes.HasPrefix(line, []byte("data: [DONE]")) {
			return gap, nil
		}
		if !bytes.HasPrefix(line, []byte("data: ")) {
			continue
		}
		now := time.Now()
		if last.IsZero() {
			open()
		} else {
			gap = max(gap, now.Sub(last))
		}
		last = now
	}
}

// fdSlack is the descriptors a process of the harness needs besides two
// per held stream.
const fdSlack = 512

// raiseNoFile raises the harness's RLIMIT_NOFILE (the proxies inherit it)
// to need descriptors, the hard limit too when it is lower (as root with
// CAP_SYS_RESOURCE: setrlimit(2)). It says what it did; on an error,
// limit is the hard limit that stays.
func raiseNoFile(need uint64) (said string, limit uint64, err error) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return "", 0, os.NewSyscallError("getrlimit", err)
	}
	if rl.Cur >= need {
		return "", rl.Cur, nil
	}
	if rl.Max >= need {
		want := syscall.Rlimit{Cur: need, Max: rl.Max}
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want); err != nil {
			return "", rl.Cur, fmt.Errorf("RLIMIT_NOFILE %d, %d needed: %w", rl.Cur, need, os.NewSyscallError("setrlimit", err))
		}
		return fmt.Sprintf("RLIMIT_NOFILE %d → %d", rl.Cur, need), need, nil
	}
	want := syscall.Rlimit{Cur: need, Max: need}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want); err != nil {
		// Raise the soft limit to the hard one at least.
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: rl.Max, Max: rl.Max})
		return "", rl.Max, fmt.Errorf("RLIMIT_NOFILE hard limit %d, %d needed, not raised: %w", rl.Max, need, os.NewSyscallError("setrlimit", err))
	}
	return fmt.Sprintf("RLIMIT_NOFILE %d (hard %d) → %d", rl.Cur, rl.Max, need), need, nil
}
