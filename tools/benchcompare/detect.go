// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"time"
)

// detectRows: row group 3. One daemon, -agents agents (benchagent beat):
// each beats every 100ms, then falls silent (but stays alive) at a time
// of its own, spread over a second; heartbeat_timeout is 1s. Lateness is
// the certificate's triggered_at minus (final_state.last_heartbeat_at +
// 1s): how late the kill decision came after the deadline.
func (b *bench) detectRows() ([]Row, []string) {
	const g = "3 detection"
	n := b.cfg.agents
	name := fmt.Sprintf("heartbeat_timeout 1s, %d agents under one daemon: lateness (triggered_at − last beat − 1s)", n)
	const timeout = time.Second
	b.logf("3 detection: %d agents under one daemon", n)
	d, err := b.startDaemon("detect", "")
	if err != nil {
		return []Row{failed(g, name, err)}, nil
	}
	defer func() {
		if d.running() {
			_, _ = d.stop(30 * time.Second)
		}
	}()
	for i := range n {
		stop := 1500*time.Millisecond + time.Duration(i)*time.Second/time.Duration(n)
		body := fmt.Sprintf("id: a%d\ncommand: [%s, beat, 100ms, %s]\nchecks: {heartbeat_timeout: 1s}\nescalation: {coop_grace: 200ms, term_grace: 200ms}\n",
			i, b.agent, stop)
		if err := d.writeAgent(fmt.Sprintf("a%d", i), body); err != nil {
			return []Row{failed(g, name, err)}, nil
		}
	}
	deadline := time.Now().Add(60 * time.Second)
	for countCerts(d.certs) < n {
		if time.Now().After(deadline) {
			return []Row{failed(g, name, fmt.Errorf("%d of %d certificates after 60s", countCerts(d.certs), n))}, nil
		}
		if !d.running() {
			return []Row{failed(g, name, fmt.Errorf("the daemon exited (%v): %s", d.exitErr, d.logTail()))}, nil
		}
		if !b.sleepCtx(100 * time.Millisecond) {
			return nil, nil
		}
	}
	took, stopErr := d.stop(30 * time.Second)
	certs, err := readCerts(d.certs)
	if err != nil {
		return []Row{failed(g, name, err)}, nil
	}
	var late []float64
	other := 0
	for _, c := range certs {
		if c.TriggerCheck != "heartbeat_timeout" || c.FinalState.LastHeartbeatAt == nil {
			other++
			continue
		}
		due := c.FinalState.LastHeartbeatAt.Add(timeout)
		late = append(late, float64(c.TriggeredAt.Sub(due).Nanoseconds())/1e6)
	}
	r, _ := durRow(g, name, late, true)
	r.Target = "< 2 ms (p50)"
	r.OK = checkLE(Summarize(late).P50, 2)
	rows := []Row{r}
	var notes []string
	if other > 0 {
		notes = append(notes, fmt.Sprintf("detection: %d certificate(s) with another trigger than heartbeat_timeout left out", other))
	}
	if stopErr != nil {
		rows = append(rows, failed(g, "daemon stop after the detection run", stopErr))
	}
	_ = took
	return rows, notes
}
