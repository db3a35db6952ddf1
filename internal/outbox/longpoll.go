// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package outbox

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"time"

	"go.uber.org/zap"
)

// LongPollWait is how long the host asks the control plane to hold a
// directives request open when it has nothing to say (?wait=30s); a
// directive posted meanwhile is answered at once.
const LongPollWait = 30 * time.Second

// repeatPause is the pause before the next long poll after an answer of
// only directives already handed over.
const repeatPause = time.Second

// errWaitRefused: the control plane answered 400 to a request with
// ?wait=: it does not know long polls, so they are not asked for again.
var errWaitRefused = errors.New("the control plane refused ?wait= (HTTP 400)")

// RunHost asks for the host's directives until ctx ends, then returns
// nil:
//
//	GET {url}/directives?host={host}&wait={wait}
//
// A control plane that holds the request until it has a directive (a
// long poll) gets the next request at once: a directive reaches the host
// as soon as it is posted. One that answers at once with nothing (it
// does not hold: an answer in less than half of wait), or fails, is asked
// again after the poll interval (jittered): plain polling. One that
// answers at once with directives already handed over only (it serves a
// directive until its receipt arrives) is asked again after a second at
// most. One that refuses ?wait= (HTTP 400) is polled without it from then
// on. wait 0 never asks for a long poll.
func (p *poller) RunHost(ctx context.Context, host string, wait time.Duration) error {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		began := time.Now()
		ds, err := p.fetchHost(ctx, host, wait)
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, errWaitRefused) {
			p.log.Warn("the control plane does not hold directive requests (?wait= refused); polling every poll_interval instead",
				zap.Duration("poll_interval", p.opts.Interval))
			wait = 0
			t.Reset(0)
			continue
		}
		if err != nil {
			p.log.Warn("control plane directives not fetched", zap.Error(err))
			t.Reset(p.jittered())
			continue
		}
		n := 0
		for _, d := range ds {
			if p.handle("", d) {
				n++
			}
		}
		switch {
		case n > 0, wait > 0 && time.Since(began) >= wait/2:
			t.Reset(0) // held, or answered with news: ask again at once
		case wait > 0 && len(ds) > 0:
			// Only directives already handed over, answered at once: a
			// control plane that serves a directive until it has its
			// receipt, while the host is still acting on it. Not a poll
			// interval (a directive posted meanwhile would wait that
			// long), not at once either (a tight loop).
			t.Reset(min(repeatPause, p.jittered()))
		default:
			t.Reset(p.jittered())
		}
	}
}

// hostDirectivesURL is the host's directives, with ?wait= when wait > 0.
func (p *poller) hostDirectivesURL(host string, wait time.Duration) string {
	q := url.Values{"host": {host}}
	if wait > 0 {
		q.Set("wait", wait.String())
	}
	return p.base + "/directives?" + q.Encode()
}

// fetchHost is one request for the host's directives: its timeout is
// wait (how long the control plane may hold it) plus the usual one.
func (p *poller) fetchHost(ctx context.Context, host string, wait time.Duration) ([]Directive, error) {
	ctx, cancel := context.WithTimeout(ctx, wait+p.opts.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.hostDirectivesURL(host, wait), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	if err := setToken(req, p.opts.TokenFile); err != nil {
		return nil, err
	}
	ds, err := p.do(req)
	var se *statusError
	if errors.As(err, &se) && se.status == http.StatusBadRequest && wait > 0 {
		return nil, errWaitRefused
	}
	return ds, err
}
