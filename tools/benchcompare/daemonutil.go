// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// daemon is one `hermeskilld daemon` under a directory of its own.
type daemon struct {
	b       *bench
	dir     string
	agents  string // agents_dir
	certs   string // state_dir/certs
	ctl     string // control socket
	metrics string // host:port, or ""
	pid     int
	done    chan struct{}
	http    *http.Client
	exitErr error
}

// startDaemon starts a daemon whose file is the directories plus extra
// (YAML lines), and waits for its control socket.
func (b *bench) startDaemon(name, extra string, env ...string) (*daemon, error) {
	dir := filepath.Join(b.tmp, name)
	d := &daemon{b: b, dir: dir, agents: filepath.Join(dir, "agents"),
		certs: filepath.Join(dir, "state", "certs"), ctl: filepath.Join(dir, "run", "control.sock"),
		done: make(chan struct{})}
	if err := os.MkdirAll(d.agents, 0o755); err != nil {
		return nil, err
	}
	conf := fmt.Sprintf("state_dir: %s/state\nruntime_dir: %s/run\nagents_dir: %s\n%s", dir, dir, d.agents, extra)
	cfgPath := filepath.Join(dir, "hermeskilld.yaml")
	if err := os.WriteFile(cfgPath, []byte(conf), 0o644); err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(dir, "daemon.log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := b.command([]string{b.cfg.hk, "daemon", "--config", cfgPath, "--log-level", "warn"}, env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := b.start(cmd, true); err != nil {
		return nil, err
	}
	d.pid = cmd.Process.Pid
	go func() {
		d.exitErr = b.wait(cmd)
		close(d.done)
	}()
	d.http = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var nd net.Dialer
			return nd.DialContext(ctx, "unix", d.ctl)
		}}}
	deadline := time.Now().Add(15 * time.Second)
	for {
		if _, err := os.Stat(d.ctl); err == nil {
			return d, nil
		}
		select {
		case <-d.done:
			return nil, fmt.Errorf("the daemon exited at start (%v): %s", d.exitErr, d.logTail())
		case <-b.ctx.Done():
			return nil, b.ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			d.kill()
			return nil, errors.New("no control socket after 15s: " + d.logTail())
		}
	}
}

func (d *daemon) logTail() string {
	raw, _ := os.ReadFile(filepath.Join(d.dir, "daemon.log"))
	s := strings.TrimSpace(string(raw))
	if len(s) > 300 {
		s = "…" + s[len(s)-300:]
	}
	return s
}

// writeAgent writes agents_dir/ID.yaml atomically (temp file, rename).
func (d *daemon) writeAgent(id, body string) error {
	tmp := filepath.Join(d.agents, "."+id+".tmp")
	if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(d.agents, id+".yaml"))
}

type agentSummary struct {
	ID              string    `json:"id"`
	State           string    `json:"state"`
	PID             int       `json:"pid"`
	LastHeartbeatAt time.Time `json:"last_heartbeat_at"`
}

// list is GET /v1/agents on the control socket.
func (d *daemon) list() ([]agentSummary, error) {
	resp, err := d.http.Get("http://hermeskilld/v1/agents")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("GET /v1/agents: %s", resp.Status)
	}
	var out []agentSummary
	return out, json.NewDecoder(resp.Body).Decode(&out)
}

// waitBeating waits until n agents are running with a heartbeat.
func (d *daemon) waitBeating(n int, timeout time.Duration) (time.Duration, error) {
	t0 := time.Now()
	last := 0
	for {
		as, err := d.list()
		if err == nil {
			last = 0
			for _, a := range as {
				if a.State == "running" && !a.LastHeartbeatAt.IsZero() {
					last++
				}
			}
			if last >= n {
				return time.Since(t0), nil
			}
		}
		select {
		case <-d.done:
			return 0, fmt.Errorf("the daemon exited (%v) with %d of %d agents up: %s", d.exitErr, last, n, d.logTail())
		case <-d.b.ctx.Done():
			return 0, d.b.ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Since(t0) > timeout {
			return 0, fmt.Errorf("only %d of %d agents running with a heartbeat after %s", last, n, timeout)
		}
	}
}

// stop sends SIGTERM and waits for the exit: how long it took.
func (d *daemon) stop(timeout time.Duration) (time.Duration, error) {
	t0 := time.Now()
	if err := syscall.Kill(d.pid, syscall.SIGTERM); err != nil {
		return 0, err
	}
	select {
	case <-d.done:
		took := time.Since(t0)
		if d.exitErr != nil {
			return took, fmt.Errorf("the daemon exited with %v: %s", d.exitErr, d.logTail())
		}
		return took, nil
	case <-time.After(timeout):
		d.kill()
		return 0, fmt.Errorf("the daemon had not exited %s after SIGTERM", timeout)
	}
}

// kill ends the daemon at once (its agents die with it: the keeper).
func (d *daemon) kill() {
	_ = syscall.Kill(-d.pid, syscall.SIGKILL)
	_ = syscall.Kill(d.pid, syscall.SIGKILL)
	select {
	case <-d.done:
	case <-time.After(5 * time.Second):
	}
}

// running reports whether the daemon has not exited.
func (d *daemon) running() bool {
	select {
	case <-d.done:
		return false
	default:
		return true
	}
}

// scrape sums the samples of the named Prometheus series.
func (d *daemon) scrape(names ...string) (map[string]float64, error) {
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Get("http://" + d.metrics + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		for _, n := range names {
			if strings.HasPrefix(line, n+"{") || strings.HasPrefix(line, n+" ") {
				f := strings.Fields(line)
				if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil {
					out[n] += v
				}
			}
		}
	}
	return out, sc.Err()
}

// freePort returns a loopback address nobody listens on (now).
func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// cert is the part of a death certificate the rows read.
type cert struct {
	AgentID      string     `json:"agent_id"`
	TriggerCheck string     `json:"trigger_check"`
	Containment  string     `json:"containment"`
	TriggeredAt  time.Time  `json:"triggered_at"`
	TerminatedAt *time.Time `json:"terminated_at"`
	Escalation   struct {
		Reached string `json:"reached"`
	} `json:"escalation"`
	ShutdownLog []struct {
		Step   string         `json:"step"`
		At     time.Time      `json:"at"`
		Detail map[string]any `json:"detail"`
	} `json:"shutdown_log"`
	FinalState struct {
		LastHeartbeatAt *time.Time `json:"last_heartbeat_at"`
		Heartbeats      int64      `json:"heartbeats"`
	} `json:"final_state"`
}

// step returns the time of the named shutdown step.
func (c *cert) step(name string) (time.Time, bool) {
	for _, s := range c.ShutdownLog {
		if s.Step == name {
			return s.At, true
		}
	}
	return time.Time{}, false
}

// readCerts reads every certificate in dir.
func readCerts(dir string) ([]cert, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	var out []cert
	for _, p := range paths {
		raw, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		var c cert
		if err := json.Unmarshal(raw, &c); err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Base(p), err)
		}
		out = append(out, c)
	}
	return out, nil
}

// countCerts counts the certificate files in dir.
func countCerts(dir string) int {
	paths, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	return len(paths)
}
