// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// sloAdded is the added p99 (over the direct path's, at the same offered
// rate) within which a proxy sustains a rate.
const sloAdded = 20.0 // ms

// sloMaxInFlight bounds the requests of one step in flight at once: a
// proxy that holds more has not sustained the rate.
const sloMaxInFlight = 2048

// sloRows: plain completions offered at a fixed rate (open loop: each
// request sent at its time, whether or not the earlier ones were
// answered, its latency counted from that time), doubling each step from
// -gw-slo-from; at each step the paths in turn for -gw-slo-window. A
// proxy sustains a rate when it answers every request, keeps up with the
// rate, and its p99 is within sloAdded of the direct path's at that rate.
// The row is the highest rate each proxy sustained.
func (b *bench) sloRows(g string, paths []*benchPath) []Row {
	type best struct {
		rate     float64
		added    float64 // at that rate
		failedAt string  // the next step's failure
	}
	results := make([]best, len(paths))
	stopped := make([]bool, len(paths))
	c := benchClient(sloMaxInFlight)
	defer c.CloseIdleConnections()
	var directLimit string
	for rate := float64(b.cfg.gwSLOFrom); rate <= float64(b.cfg.gwSLOMax); rate *= 2 {
		var directP99 float64
		for i, p := range paths {
			if stopped[i] {
				continue
			}
			st := offer(c, p, rate, b.cfg.gwSLOWindow)
			if b.interrupted() {
				return nil
			}
			if i == 0 {
				if why := st.unsustained(); why != "" {
					directLimit = fmt.Sprintf("the direct path itself did not sustain %s (%s)", fmtRate(rate), why)
					for j := range stopped {
						stopped[j] = true
					}
					break
				}
				directP99 = st.p99
				continue
			}
			why := st.unsustained()
			added := st.p99 - directP99
			if why == "" && added >= sloAdded {
				why = "added p99 " + fmtSignedMs(added)
			}
			if why != "" {
				results[i].failedAt = fmt.Sprintf("%s: %s", fmtRate(rate), why)
				stopped[i] = true
				continue
			}
			results[i].rate, results[i].added = rate, added
		}
		if !slices.Contains(stopped, false) {
			break
		}
	}
	var rows []Row
	for i, p := range paths[1:] {
		r := results[i+1]
		row := Row{Group: g, Name: fmt.Sprintf("plain completion, open loop: %s's highest rate sustained with added p99 < %.0f ms", p.name, sloAdded),
			P50: fmtRate(r.rate)}
		if r.rate == 0 {
			row.P50 = "none of the rates"
		} else {
			row.P99 = fmtMs(r.added) + " added"
		}
		switch {
		case r.failedAt != "":
			row.Versus = "not at " + r.failedAt
		case directLimit != "":
			row.Versus = directLimit
		default:
			row.Versus = fmt.Sprintf("every rate up to -gw-slo-max %s", fmtRate(float64(b.cfg.gwSLOMax)))
		}
		rows = append(rows, row)
	}
	return rows
}

// offered is one step of an open-loop load on one path.
type offered struct {
	sent, done, failed, shed int64
	p99                      float64 // ms, of the requests done
	first                    error
}

// unsustained says why the step did not sustain its rate, "" when it
// did. A proxy that falls behind shows in the p99: each latency counts
// from the request's time.
func (o offered) unsustained() string {
	switch {
	case o.failed > 0:
		return fmt.Sprintf("%d requests failed (first: %v)", o.failed, o.first)
	case o.shed > 0:
		return fmt.Sprintf("over %d requests in flight", sloMaxInFlight)
	}
	return ""
}

// offer sends plain completions on p at rate for d, each at its time
// (a millisecond's worth at once), and waits for every answer.
func offer(c *http.Client, p *benchPath, rate float64, d time.Duration) offered {
	var o offered
	var inFlight, failed, shed atomic.Int64
	var mu sync.Mutex
	var lat []float64
	var wg sync.WaitGroup
	start := time.Now()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	total := int64(rate * d.Seconds())
	for o.sent < total {
		due := min(total, int64(rate*time.Since(start).Seconds())+1)
		for ; o.sent < due; o.sent++ {
			at := start.Add(time.Duration(float64(o.sent) / rate * float64(time.Second)))
			if inFlight.Add(1) > sloMaxInFlight {
				inFlight.Add(-1)
				shed.Add(1)
				continue
			}
			wg.Go(func() {
				defer inFlight.Add(-1)
				err := request(c, p, false, "")
				took := ms(time.Since(at))
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					failed.Add(1)
					o.first = cmpErr(o.first, err)
					return
				}
				lat = append(lat, took)
			})
		}
		<-tick.C
	}
	wg.Wait()
	o.failed, o.shed, o.done = failed.Load(), shed.Load(), int64(len(lat))
	o.p99 = Summarize(lat).P99
	return o
}
