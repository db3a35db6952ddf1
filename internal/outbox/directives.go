// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package outbox

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"go.uber.org/zap"
)

// Directive actions hermeskilld acts on.
const (
	actionKill = "kill"
	// actionRevoke is a standing revocation of the agent: killed, its LLM
	// access withdrawn, and kept from starting until an operator lifts it.
	actionRevoke = "revoke"
)

// Defaults of pollerOptions.
const (
	defaultPollInterval = 10 * time.Second
	defaultMaxSeen      = 10000
)

// maxDirectivesBody bounds a directives response.
const maxDirectivesBody = 1 << 20

// Directive is one request from the control plane (see the package
// comment for the wire format).
type Directive struct {
	ID       string `json:"id"`
	Action   string `json:"action"`
	Reason   string `json:"reason"`
	Operator string `json:"operator"`
}

// pollerOptions configure a poller. URL, Dir, Agents and Handle are
// required.
type pollerOptions struct {
	URL       string // the control plane's base URL, as Options.URL
	TokenFile string // as Options.TokenFile
	// Dir keeps seenFile (the outbox directory).
	Dir string
	// Interval between polls of all agents (default 10s), jittered ±20%.
	Interval time.Duration
	// Timeout bounds one request (default 10s).
	Timeout time.Duration
	// MaxSeen bounds the remembered directive ids (default 10000); the
	// oldest are forgotten first.
	MaxSeen    int
	HTTPClient *http.Client
	// Agents returns the ids of the agents to poll for, at each poll.
	Agents func() []string
	// Handle is called once per new directive with a known action, on the
	// poller's goroutine: it should hand the work off, not wait for a kill
	// to finish.
	Handle func(agentID string, d Directive)
	Log    *zap.Logger
}

// poller pulls directives from the control plane. Run (or PollOnce) is
// called from one goroutine at a time.
type poller struct {
	opts pollerOptions
	base string
	log  *zap.Logger
	seen *seenSet
}

// newPoller loads the remembered directive ids from Dir/seenFile (an
// unreadable file is logged and started afresh: at worst a directive is
// acted on twice) and returns a poller.
func newPoller(opts pollerOptions) (*poller, error) {
	if opts.URL == "" || opts.Dir == "" || opts.Agents == nil || opts.Handle == nil {
		return nil, errors.New("new poller: URL, Dir, Agents and Handle are required")
	}
	opts.Interval = cmp.Or(opts.Interval, defaultPollInterval)
	opts.Timeout = cmp.Or(opts.Timeout, defaultTimeout)
	opts.MaxSeen = cmp.Or(opts.MaxSeen, defaultMaxSeen)
	opts.HTTPClient = withoutRedirects(opts.HTTPClient)
	if opts.Log == nil {
		opts.Log = zap.NewNop()
	}
	seen, err := loadSeen(filepath.Join(opts.Dir, seenFile), opts.MaxSeen)
	if err != nil {
		opts.Log.Error("directive ids seen before are lost; starting afresh", zap.Error(err))
	}
	return &poller{opts: opts, base: strings.TrimRight(opts.URL, "/"), log: opts.Log, seen: seen}, nil
}

// Run polls every interval until ctx ends, then returns nil. The first poll
// is after one (jittered) interval.
func (p *poller) Run(ctx context.Context) error {
	t := time.NewTimer(p.jittered())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		p.PollOnce(ctx)
		t.Reset(p.jittered())
	}
}

func (p *poller) jittered() time.Duration {
	d := p.opts.Interval
	return d - d/5 + rand.N(2*d/5+1)
}

// PollOnce asks once for the directives of every agent Agents returns and
// hands the new ones to Handle. Failures are logged (the next poll tries
// again); it returns how many directives were handed over.
func (p *poller) PollOnce(ctx context.Context) int {
	n := 0
	for _, id := range p.opts.Agents() {
		if ctx.Err() != nil {
			break
		}
		ds, err := p.fetch(ctx, id)
		if err != nil {
			if ctx.Err() == nil {
				p.log.Warn("control plane directives not fetched", zap.String("agent_id", id), zap.Error(err))
			}
			continue
		}
		for _, d := range ds {
			if p.handle(id, d) {
				n++
			}
		}
	}
	return n
}

// handle acts on d once, then remembers it.
func (p *poller) handle(agentID string, d Directive) bool {
	log := p.log.With(zap.String("agent_id", agentID), zap.String("directive_id", d.ID),
		zap.String("action", d.Action), zap.String("operator", d.Operator))
	if d.ID == "" || d.Action == "" {
		log.Warn("control plane directive without id or action ignored")
		return false
	}
	if p.seen.has(agentID, d.ID) {
		return false
	}
	acted := false
	switch d.Action {
	case actionKill, actionRevoke:
		log.Info("control plane directive", zap.String("reason", d.Reason))
		p.opts.Handle(agentID, d)
		acted = true
	default:
		log.Warn("control plane directive with an unknown action ignored")
	}
	if err := p.seen.add(agentID, d.ID, time.Now()); err != nil {
		log.Error("directive id not remembered on disk; it may be acted on again after a restart", zap.Error(err))
	}
	return acted
}

func (p *poller) directivesURL(agentID string) string {
	return p.base + "/agents/" + url.PathEscape(agentID) + "/directives"
}

func (p *poller) fetch(ctx context.Context, agentID string) ([]Directive, error) {
	ctx, cancel := context.WithTimeout(ctx, p.opts.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.directivesURL(agentID), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	if err := setToken(req, p.opts.TokenFile); err != nil {
		return nil, err
	}
	resp, err := p.opts.HTTPClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxDirectivesBody+1))
	if err != nil {
		return nil, fmt.Errorf("read directives: %w", err)
	}
	switch {
	case resp.StatusCode == http.StatusNoContent, resp.StatusCode == http.StatusNotFound:
		return nil, nil
	case isRedirect(resp.StatusCode):
		return nil, fmt.Errorf("GET %s: HTTP %d to %q: redirects are never followed (the token goes to the configured origin only)",
			req.URL, resp.StatusCode, cut(resp.Header.Get("Location"), maxBodyLog))
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("GET %s: HTTP %d: %s", req.URL, resp.StatusCode, cut(string(body), maxBodyLog))
	case len(body) > maxDirectivesBody:
		return nil, fmt.Errorf("GET %s: response over %d bytes", req.URL, maxDirectivesBody)
	}
	var r struct {
		Directives []Directive `json:"directives"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("GET %s: %w", req.URL, err)
	}
	return r.Directives, nil
}

func cut(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
