// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// gatewayRows: row group 7. The LLM gateway (metering on, a priced model)
// beside a bare httputil.ReverseProxy on the same upstream transport
// settings (the floor) and the direct path, all to the same fake upstream
// on loopback, which lives in the harness with the load. Each proxy is the
// harness's own binary started as a process of its own (serve-proxy), so
// that its CPU (utime+stime from /proc, over every request of the window)
// and its RSS are its own. Plain completions and streams of streamChunks
// chunks:
//   - latency at concurrency 1, the three paths interleaved request by
//     request: added p50 and p99 are each path's minus the direct path's;
//   - requests per second at -gw-conc agents, windows of -gw-window,
//     the paths interleaved each round, with the proxies' CPU per request;
//   - -gw-streams streams of one event every 100 ms held open at once for
//     -gw-hold: held without a stall (no gap over a second between two
//     events), and the proxy's RSS per open stream.
func (b *bench) gatewayRows() ([]Row, []string) {
	const g = "7 gateway"
	var notes []string
	// Each held stream is two descriptors in the proxy (the agent's
	// connection and the upstream's) and two in the harness (its client's
	// and its fake upstream's); the proxies inherit the harness's limit.
	// Where it cannot be raised, the counts are cut to what it allows.
	most := 0
	if b.cfg.gwParts["held"] {
		most = slices.Max(b.cfg.gwStreams)
	}
	if b.cfg.gwParts["many"] {
		most = max(most, b.cfg.gwMany)
	}
	if said, limit, err := raiseNoFile(uint64(2*most + fdSlack)); err != nil {
		fit := max(int(limit)-fdSlack, 0) / 2
		notes = append(notes, fmt.Sprintf("gateway: %v: at most %d streams held at once", err, fit))
		for i, n := range b.cfg.gwStreams {
			b.cfg.gwStreams[i] = min(n, fit)
		}
		b.cfg.gwMany = min(b.cfg.gwMany, fit)
	} else if said != "" {
		notes = append(notes, "gateway: "+said+" for the held streams")
	}
	up, err := startFakeUpstream()
	if err != nil {
		return []Row{failed(g, "fake upstream", err)}, nil
	}
	defer up.close()
	paths := []*benchPath{{name: "direct", base: up.url + "/v1", key: "direct"}}
	for _, kind := range []string{"bare", "gateway"} {
		p, err := b.startProxy(kind, up.url)
		if err != nil {
			return []Row{failed(g, kind+" proxy", err)}, nil
		}
		defer b.stopProxy(p)
		paths = append(paths, p)
	}
	b.logf("7 gateway: %d requests per path at c=1, %d rounds of %s at c=%d, %v streams for %s, %d at a chunk per %s",
		b.cfg.gwN, b.cfg.gwRounds, b.cfg.gwWindow, b.cfg.gwConc, b.cfg.gwStreams, b.cfg.gwHold, b.cfg.gwMany, b.cfg.gwManyEvery)
	var rows []Row
	for _, stream := range []bool{false, true} {
		kind := "plain completion"
		if stream {
			kind = fmt.Sprintf("stream of %d chunks", streamChunks)
		}
		if b.cfg.gwParts["latency"] {
			rows = append(rows, b.latencyRows(g, kind, paths, stream)...)
		}
		if b.interrupted() {
			return rows, nil
		}
		if b.cfg.gwParts["rate"] {
			rows = append(rows, b.throughputRows(g, kind, paths, stream)...)
		}
		if b.interrupted() {
			return rows, nil
		}
	}
	if b.cfg.gwParts["slo"] && !b.interrupted() {
		rows = append(rows, b.sloRows(g, paths)...)
	}
	var specs []holdSpec
	for _, n := range b.cfg.gwStreams {
		specs = append(specs, holdSpec{n: n, every: b.cfg.gwEvery, hold: b.cfg.gwHold})
	}
	if b.cfg.gwParts["held"] {
		rows = append(rows, b.heldRows(g, up, paths, specs, b.cfg.gwProfile)...)
	}
	if b.cfg.gwParts["many"] && b.cfg.gwMany > 0 && !b.interrupted() {
		rows = append(rows, b.heldRows(g, up, paths[1:], []holdSpec{{n: b.cfg.gwMany, every: b.cfg.gwManyEvery, hold: b.cfg.gwManyHold}}, b.cfg.gwProfile)...)
	}
	notes = append(notes, "gateway: added latency is a path's percentile minus the direct path's; CPU per request is the proxy process's utime+stime over a window divided by the requests it completed; the load and the fake upstream share the machine with the proxies; a held stream is stalled when a gap between two of its chunks is a second longer than their period, or it broke; RSS per open stream is the proxy's RSS with the streams open minus before, over their count, and the live heap and stacks the same after a GC.")
	return rows, notes
}

// streamChunks is the content chunks of a streamed completion.
const streamChunks = 20

// benchPath is one way to the fake upstream: base is what
// /chat/completions is appended to.
type benchPath struct {
	name, base, key string
	kind            string    // a proxy's: bare or gateway
	cmd             *exec.Cmd // a proxy; nil: direct
	stdin           io.WriteCloser
	stdout          *bufio.Reader
}

// ask sends the proxy one question (proxyCommand) and returns its answer.
func (p *benchPath) ask(question string) (string, error) {
	if _, err := io.WriteString(p.stdin, question+"\n"); err != nil {
		return "", err
	}
	line := make(chan string, 1)
	go func() {
		l, _ := p.stdout.ReadString('\n')
		line <- strings.TrimSuffix(l, "\n")
	}()
	select {
	case l := <-line:
		if rest, ok := strings.CutPrefix(l, "error "); ok {
			return "", fmt.Errorf("%s proxy: %s", p.name, rest)
		}
		return l, nil
	case <-time.After(30 * time.Second):
		return "", fmt.Errorf("%s proxy: no answer to %q in 30s", p.name, question)
	}
}

// liveMem is the proxy's heap in use and goroutine stacks (bytes, after a
// GC) and its goroutines.
func (p *benchPath) liveMem() (heap, stacks, goroutines int64, err error) {
	l, err := p.ask("mem")
	if err != nil {
		return 0, 0, 0, err
	}
	if _, err := fmt.Sscanf(l, "mem %d %d %d", &heap, &stacks, &goroutines); err != nil {
		return 0, 0, 0, fmt.Errorf("%s proxy said %q", p.name, l)
	}
	return heap, stacks, goroutines, nil
}

func (p *benchPath) pid() int {
	if p.cmd == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// startProxy starts the harness's binary as the proxy of kind (bare or
// gateway) and waits for its ready line.
func (b *bench) startProxy(kind, upstream string) (*benchPath, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	argv := []string{exe, serveProxyArg, kind, upstream}
	if b.cfg.gwProfile != "" {
		argv = append(argv, "profile")
	}
	cmd := b.command(argv)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = b.cfg.log
	if err := b.start(cmd, false); err != nil {
		return nil, err
	}
	p := &benchPath{name: kind, kind: kind, cmd: cmd, stdin: stdin, stdout: bufio.NewReader(stdout)}
	if kind == "bare" {
		p.name = "bare proxy"
	}
	line := make(chan string, 1)
	go func() {
		l, _ := p.stdout.ReadString('\n')
		line <- l
	}()
	select {
	case l := <-line:
		f := strings.Fields(l)
		if len(f) == 3 && f[0] == "ready" {
			p.base, p.key = f[1], f[2]
			return p, nil
		}
		err = fmt.Errorf("%s proxy said %q", kind, l)
	case <-time.After(10 * time.Second):
		err = fmt.Errorf("%s proxy not ready in 10s", kind)
	}
	b.stopProxy(p)
	return nil, err
}

func (b *bench) stopProxy(p *benchPath) {
	_ = p.stdin.Close()
	done := make(chan struct{})
	go func() { _ = b.wait(p.cmd); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
	}
}

// fakeUpstream answers chat completions: a completion with its usage, or
// a stream of streamChunks chunks (each written and flushed apart, as a
// provider sends them), the usage chunk when asked, and [DONE]; with
// ?hold=D, a stream of one chunk every 100 ms (or ?every=P) for D.
type fakeUpstream struct {
	url string
	srv *http.Server
}

const (
	benchCompletion = `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-4.1-mini","choices":[{"index":0,"message":{"role":"assistant","content":"Hello! How can I help you today?"},"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":9,"total_tokens":21}}`
	benchChunk      = `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4.1-mini","choices":[{"index":0,"delta":{"content":" token"},"finish_reason":null}]}` + "\n\n"
	benchUsage      = `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4.1-mini","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":20,"total_tokens":32}}` + "\n\n"
	benchDone       = "data: [DONE]\n\n"
)

func startFakeUpstream() (*fakeUpstream, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if !bytes.Contains(body, []byte(`"stream":true`)) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, benchCompletion)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		if hold, err := time.ParseDuration(r.URL.Query().Get("hold")); err == nil {
			every, err := time.ParseDuration(r.URL.Query().Get("every"))
			if err != nil || every <= 0 {
				every = 100 * time.Millisecond
			}
			tick := time.NewTicker(every)
			defer tick.Stop()
			end := time.Now().Add(hold)
			for time.Now().Before(end) {
				io.WriteString(w, benchChunk)
				fl.Flush()
				select {
				case <-tick.C:
				case <-r.Context().Done():
					return
				}
			}
		} else {
			for range streamChunks {
				io.WriteString(w, benchChunk)
				fl.Flush()
			}
		}
		if bytes.Contains(body, []byte(`"include_usage":true`)) {
			io.WriteString(w, benchUsage)
		}
		io.WriteString(w, benchDone)
	})}
	go func() { _ = srv.Serve(ln) }()
	return &fakeUpstream{url: "http://" + ln.Addr().String(), srv: srv}, nil
}

func (u *fakeUpstream) close() { _ = u.srv.Close() }

// closeIdle closes the upstream's idle keep-alive connections (the
// proxies' pools).
func (u *fakeUpstream) closeIdle() {
	u.srv.SetKeepAlivesEnabled(false)
	u.srv.SetKeepAlivesEnabled(true)
}

// benchClient is the agents' side: keep-alive connections, enough idle
// ones for every agent of the run.
func benchClient(conns int) *http.Client {
	return &http.Client{Transport: &http.Transport{MaxIdleConns: 3 * conns, MaxIdleConnsPerHost: conns, DisableCompression: true}}
}

// request sends one completion on path and reads it whole.
func request(c *http.Client, p *benchPath, stream bool, query string) error {
	body := `{"model":"gpt-4.1-mini","messages":[{"role":"user","content":"hello"}]}`
	if stream {
		body = `{"model":"gpt-4.1-mini","messages":[{"role":"user","content":"hello"}],"stream":true}`
	}
	req, err := http.NewRequest(http.MethodPost, p.base+"/chat/completions"+query, strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+p.key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	switch {
	case err != nil:
		return err
	case resp.StatusCode != http.StatusOK:
		return fmt.Errorf("%s: status %d: %s", p.name, resp.StatusCode, oneLine(string(got)))
	case stream && (!bytes.HasSuffix(got, []byte(benchDone)) || bytes.Count(got, []byte(`" token"`)) != streamChunks):
		return fmt.Errorf("%s: a stream without its %d chunks and [DONE]", p.name, streamChunks)
	}
	return nil
}

// latencyRows: each path's latency at concurrency 1, interleaved.
func (b *bench) latencyRows(g, kind string, paths []*benchPath, stream bool) []Row {
	c := benchClient(1)
	lat := make([][]float64, len(paths))
	errs := make([]requestErrors, len(paths))
	for i := range b.cfg.gwN + 50 {
		for k := range paths {
			j := (i + k) % len(paths)
			t0 := time.Now()
			if err := request(c, paths[j], stream, ""); err != nil {
				errs[j].add(err)
				continue
			}
			if i >= 50 { // the first 50 warm the connections
				lat[j] = append(lat[j], ms(time.Since(t0)))
			}
		}
		if b.interrupted() {
			return nil
		}
	}
	var rows []Row
	var direct Summary
	for k, p := range paths {
		r, s := durRow(g, fmt.Sprintf("%s, c=1: %s", kind, p.name), lat[k], false)
		if k == 0 {
			direct = s
			r.Versus = "floor"
		} else {
			r.Versus = fmt.Sprintf("added p50 %s, p99 %s", fmtSignedMs(s.P50-direct.P50), fmtSignedMs(s.P99-direct.P99))
		}
		if p.name == "gateway" && !stream {
			r.Target, r.OK = "added p99 ≤ 0.2 ms", checkLE(s.P99-direct.P99, 0.2)
		}
		r.Versus += errs[k].String()
		rows = append(rows, r)
	}
	return rows
}

// throughputRows: requests per second at gwConc agents and each proxy's
// CPU per request, the paths interleaved each round.
func (b *bench) throughputRows(g, kind string, paths []*benchPath, stream bool) []Row {
	conc := b.cfg.gwConc
	c := benchClient(conc)
	rates := make([][]float64, len(paths))
	lat := make([][]float64, len(paths))
	ticks := make([]int64, len(paths))
	done := make([]int64, len(paths))
	errs := make([]requestErrors, len(paths))
	for round := range b.cfg.gwRounds {
		for k := range paths {
			i := (round + k) % len(paths)
			p := paths[i]
			var t0 int64
			if p.pid() != 0 {
				t0, _ = cpuTicks(p.pid())
			}
			n, l, elapsed := window(c, p, stream, conc, b.cfg.gwWindow, &errs[i])
			if p.pid() != 0 {
				t1, _ := cpuTicks(p.pid())
				ticks[i] += t1 - t0
			}
			done[i] += n
			rates[i] = append(rates[i], float64(n)/elapsed.Seconds())
			lat[i] = append(lat[i], l...)
			if b.interrupted() {
				return nil
			}
		}
	}
	var rows, cpuRows []Row
	var bareRate, bareCPU float64
	for i, p := range paths {
		s := Summarize(rates[i])
		ls := Summarize(lat[i])
		r := Row{Group: g, Name: fmt.Sprintf("%s, c=%d: %s requests per second (p99 latency)", kind, conc, p.name), N: s.N,
			P50: fmtRate(s.P50), Spread: spread(fmtRate, s.P10, s.P90), P99: fmtMs(ls.P99), Max: fmtRate(s.Max)}
		cpu := float64(ticks[i]) / clockTick / float64(max(done[i], 1)) * 1e6
		switch p.name {
		case "direct":
			r.Versus = "floor"
		case "bare proxy":
			bareRate, bareCPU = s.P50, cpu
			r.Versus = fmtRatio(s.P50/Median(rates[0])) + " of direct"
		case "gateway":
			r.Versus = fmtRatio(s.P50/bareRate) + " of bare proxy"
			r.Target, r.OK = "≥ ×0.9 of bare proxy", check(s.P50 >= 0.9*bareRate)
		}
		r.Versus += errs[i].String()
		rows = append(rows, r)
		if p.pid() == 0 {
			continue
		}
		cr := Row{Group: g, Name: fmt.Sprintf("%s, c=%d: %s CPU per request", kind, conc, p.name), N: int(done[i]),
			P50: fmt.Sprintf("%.0f µs", cpu)}
		if p.name == "gateway" {
			cr.Versus = fmtRatio(cpu/bareCPU) + " of bare proxy"
			if stream {
				cr.Target, cr.OK = "≤ ×1.3 of bare proxy", checkLE(cpu/bareCPU, 1.3)
			}
		}
		cpuRows = append(cpuRows, cr)
	}
	return append(rows, cpuRows...)
}

// window runs conc agents sending requests on p for d; it returns the
// requests completed, their latencies (ms) and the time they took. A
// request that fails is counted in errs, and its agent goes on.
func window(c *http.Client, p *benchPath, stream bool, conc int, d time.Duration, errs *requestErrors) (int64, []float64, time.Duration) {
	var n atomic.Int64
	var mu sync.Mutex
	var lat []float64
	start := time.Now()
	end := start.Add(d)
	var wg sync.WaitGroup
	for range conc {
		wg.Go(func() {
			var mine []float64
			for time.Now().Before(end) {
				t0 := time.Now()
				if err := request(c, p, stream, ""); err != nil {
					mu.Lock()
					errs.add(err)
					mu.Unlock()
					continue
				}
				mine = append(mine, ms(time.Since(t0)))
				n.Add(1)
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	return n.Load(), lat, time.Since(start)
}

// requestErrors counts a path's failed requests and keeps the first.
type requestErrors struct {
	n     int
	first error
}

func (e *requestErrors) add(err error) {
	if e.n++; e.first == nil {
		e.first = err
	}
}

// String is what a row says of them: nothing when none failed.
func (e requestErrors) String() string {
	if e.n == 0 {
		return ""
	}
	return fmt.Sprintf("; %d requests failed (first: %v)", e.n, e.first)
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}
